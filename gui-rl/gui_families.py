"""GUI task families: kinds of desktop task with many generated instances, written as OSWorld-format task files.

    python gui-rl/gui_families.py --out DIR [--train-instances 30] [--heldout-instances 4] [--seed 0]

A family draws an instance from a seed over the Tk apps of `gui-rl/apps/` (the settings dialog, the file manager,
the notes editor): the starting state (settings values, the folder's files, the note's lines), the target (a name, a
size, an item), the variant (a training family asks its task in 3-4 ways that need other actions or a value read
off the screen) and the wording; the evaluator's expected state computed from the same draw; one scripted solution
per instance (`<id>.solution.json`, text-targeted clicks resolved on the screen's OCR text view as a text policy reads
it, `slime.agentic.gui.scripted`). Checked per instance by `python -m slime.agentic.gui.check --tasks-dir
DIR/tasks`, and again by the demonstrations, which keep only instances whose evaluation scored 1.

As `terminal-rl/terminal_families.py`: `TRAIN_FAMILIES` are trained on (demonstrations and RL draw disjoint
instances), `HELDOUT_FAMILIES` are kinds of task nothing trains on. A task's domain is its family, so its key is
`<family>/<family>-<t|h><k>`. Data files (the GUI setting's prompt format): `demos.jsonl`, `rl.jsonl`,
`heldout_instances.jsonl` (unseen instances of the training families), `heldout_tasks.jsonl` (the held-out
families). The same seed writes the same bytes. Only Tk apps: a chromium page per episode would cost several times
the memory and CPU of an RL step here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slime.agentic import task_families
from slime.agentic.task_families import draw_distinct, write_family_set

APPS = "/opt/slime-gui/apps"
SETTINGS_FILE = "~/.config/demo/settings.json"
# the dialog's dropdowns (language, font) are left out: with the menu open the screen's text view came back empty
# on some draws (a starting value other than the first entry), so their scripted solutions could not be verified
LANGUAGES = ["English", "German", "French", "Spanish", "Italian"]
FONTS = ["DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono"]
CHECKS = {"notifications": "Enable notifications", "sounds": "Play sounds", "backups": "Create backup copies",
          "line_numbers": "Show line numbers", "word_wrap": "Wrap long lines"}
THEMES = {"light": "Light", "dark": "Dark", "system": "System"}
FIRST = ["Alex", "Sam", "Maria", "Jonas", "Priya", "Lena", "Omar", "Chen", "Ines", "Tomas", "Ruth", "Kofi"]
LAST = ["Kim", "Weber", "Silva", "Novak", "Haddad", "Berg", "Costa", "Ito", "Moreau", "Lund"]
FILE_STEMS = ["budget", "draft", "invoice", "photo", "notes", "report", "letter", "summary", "agenda", "recipe",
              "contract", "slides", "backup", "poster", "ticket", "resume"]
FILE_EXTS = ["txt", "csv", "pdf", "png", "md", "doc"]
FOLDER_NAMES = ["receipts", "travel", "taxes", "projects", "music", "school", "garden", "recipes", "photos", "work"]
ITEMS = ["apples", "bread", "butter", "carrots", "cheese", "coffee", "eggs", "flour", "honey", "lemons", "milk",
         "onions", "pasta", "rice", "salt", "sugar", "tea", "tomatoes", "yogurt", "beans"]
LIST_FILES = ["shopping", "groceries", "list", "market"]


@dataclass
class Instance:
    instruction: str
    config: list[dict]
    evaluator: dict
    steps: list[dict]  # the scripted solution (computer_use arguments, text targets)
    app: str
    variant: str = ""  # which way of asking the family's task this instance uses


@dataclass(frozen=True)
class Family:
    name: str
    draw: Callable[[random.Random], Instance]


# ------------------------------------------------------------------------------------------------ the apps' states


def _settings(rng: random.Random) -> dict:
    """A starting state of the settings dialog (every key, so the screen differs between instances)."""
    return {"display_name": f"{rng.choice(FIRST)} {rng.choice(LAST)}", "language": rng.choice(LANGUAGES),
            "theme": rng.choice(list(THEMES)), **{key: rng.random() < 0.5 for key in CHECKS},
            "font": rng.choice(FONTS), "font_size": rng.randrange(10, 20), "volume": rng.randrange(0, 11) * 10}


def _settings_config(state: dict) -> list[dict]:
    return [{"type": "upload_file", "parameters": {"files": [
                {"path": SETTINGS_FILE, "content": json.dumps(state, indent=2) + "\n"}]}},
            {"type": "launch", "parameters": {"command": ["python", f"{APPS}/settings.py", SETTINGS_FILE]}},
            {"type": "wait_window", "parameters": {"window_name": "Demo Settings"}}]


def _settings_check(state: dict, changed: dict, rng: random.Random) -> dict:
    """The changed keys plus two untouched ones (a policy that clicks around changes those too)."""
    keep = rng.sample(sorted(k for k in state if k not in changed), 2)
    return {"func": "check_json_settings", "result": {"type": "vm_file", "path": SETTINGS_FILE},
            "expected": {"type": "rule", "rules": {"expected": {**changed, **{k: state[k] for k in keep}}}}}


def _settings_instance(rng: random.Random, instruction: str, state: dict, changed: dict,
                       steps: list[dict], variant: str = "") -> Instance:
    return Instance(instruction, _settings_config(state), _settings_check(state, changed, rng),
                    steps + [{"action": "left_click", "target": "Save"}, {"action": "terminate", "status": "success"}],
                    "settings", variant)


def _folder(rng: random.Random) -> list[str]:
    """4-6 file names with distinct stems (a click targets the stem, which must name one entry)."""
    stems: set[str] = set()
    count = rng.randint(4, 6)
    while len(stems) < count:
        stems.add(f"{rng.choice(FILE_STEMS)}-{rng.choice(FOLDER_NAMES)}")
    return sorted(f"{stem}.{rng.choice(FILE_EXTS)}" for stem in sorted(stems))


def _files_config(files: list[str], archived: list[str] = ()) -> list[dict]:
    """The docs folder with `files` and an archive folder holding `archived`."""
    uploads = [{"path": f"~/docs/{name}", "content": f"{name} {i}\n"} for i, name in enumerate(files)]
    uploads += [{"path": f"~/docs/archive/{name}", "content": f"{name} archived\n"} for name in archived]
    return [{"type": "upload_file", "parameters": {"files": uploads}},
            {"type": "execute", "parameters": {"command": ["mkdir", "-p", "~/docs/archive"]}},
            {"type": "launch", "parameters": {"command": ["python", f"{APPS}/files.py", "~/docs"]}},
            {"type": "wait_window", "parameters": {"window_name": "Files - docs"}}]


def _files_check(entries: list[str]) -> dict:
    return {"func": "check_output_lines",
            "result": {"type": "vm_command_line", "command": "cd ~/docs && find . -mindepth 1 | sort", "shell": True},
            "expected": {"type": "rule", "rules": {"expected": sorted(f"./{e}" for e in entries)}}}


def _stem(name: str) -> str:
    """What a click targets: the name without its extension (OCR reads the stem reliably)."""
    return name.rsplit(".", 1)[0]


def _notes_config(name: str, lines: list[str]) -> list[dict]:
    return [{"type": "upload_file", "parameters": {"files": [{"path": f"~/{name}", "content": "\n".join(lines) + "\n"}]}},
            {"type": "launch", "parameters": {"command": ["python", f"{APPS}/notes.py", f"~/{name}"]}},
            {"type": "wait_window", "parameters": {"window_name": f"Notes - {name}"}}]


def _notes_check(name: str, lines: list[str]) -> dict:
    return {"func": "check_lines", "result": {"type": "vm_file", "path": f"~/{name}"},
            "expected": {"type": "rule", "rules": {"expected": lines}}}


# ------------------------------------------------------------------------------------------------ training families
# Each training family has variants: the same kind of task asked in ways that need other actions or a value the policy
# must work out from the screen (the current font size, the name already there, the n-th line, the only PDF). A model
# that learned one template per family fails the other variants: the warm start leaves room, and RL gets groups with
# mixed outcomes to learn from. The variant is recorded on the instance (the task file's and data row's `variant`).

ORDINALS = ["first", "second", "third", "fourth", "fifth"]
EXT_WORDS = {"txt": "text file", "csv": "CSV file", "pdf": "PDF", "png": "PNG image", "md": "Markdown file",
             "doc": "Word document"}
PREFIXES = ["old-", "copy-", "2024-", "final-"]
# A field is selected by clicking the value the screen shows in it (its own line of the text view): the policy copies
# that line's coordinates, where clicking beside the label asked a small model for arithmetic on them (the label +
# offset the demonstrations used was the 0.5B warm start's most frequent wrong click, gui-rl/README.md).


def name_field(current: str) -> dict:
    return {"action": "triple_click", "target": current}


def size_field(current: int) -> dict:
    return {"action": "triple_click", "target": str(current)}


def display_name(rng: random.Random) -> Instance:
    state = _settings(rng)
    first, last = state["display_name"].split(" ")
    variant = rng.choice(["set", "last-name", "first-name", "clear"])
    if variant == "set":
        name = state["display_name"]
        while name == state["display_name"]:
            name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        instruction = rng.choice([f"Change my display name in the Demo settings to '{name}'.",
                                  f"In the Demo settings, set the display name to '{name}' and save."])
    elif variant == "last-name":
        new = rng.choice([n for n in LAST if n != last])
        name = f"{first} {new}"
        instruction = f"In the Demo settings, change only the last name of my display name to {new} and save."
    elif variant == "first-name":
        new = rng.choice([n for n in FIRST if n != first])
        name = f"{new} {last}"
        instruction = f"Keep my last name but change the first name of my Demo display name to {new}, then save."
    else:
        name = ""
        instruction = "Clear the display name in the Demo settings (leave it empty) and save."
    edit = [{"action": "type", "text": name}] if name else [{"action": "key", "keys": ["delete"]}]
    return _settings_instance(rng, instruction, state, {"display_name": name},
                              [name_field(state["display_name"]), *edit], variant)


def font_size(rng: random.Random) -> Instance:
    state = _settings(rng)
    current = state["font_size"]
    variant = rng.choice(["set", "bigger", "smaller"])  # the dialog refuses sizes outside 8-32: steps stay inside
    if variant == "set":
        size = rng.choice([n for n in range(8, 33) if n != current])
        instruction = rng.choice([f"Set the font size to {size} in the Demo settings.",
                                  f"Change the Demo editor's font size to {size} and save it."])
    else:
        step = rng.randint(1, min(4, 32 - current if variant == "bigger" else current - 8))
        size = current + step if variant == "bigger" else current - step
        instruction = (f"Make the Demo editor's font {step} point{'s' if step > 1 else ''} "
                       f"{'bigger' if variant == 'bigger' else 'smaller'} than it is now, and save.")
    return _settings_instance(rng, instruction, state, {"font_size": size},
                              [size_field(current), {"action": "type", "text": str(size)}], variant)


def turn_on(rng: random.Random) -> Instance:
    state = _settings(rng)
    variant = rng.choice(["one", "two", "with-size"])
    keys = rng.sample(["sounds", "backups", "word_wrap"], 2 if variant == "two" else 1)
    for key in keys:
        state[key] = False
    labels = [CHECKS[key] for key in keys]
    changed = {key: True for key in keys}
    steps = [{"action": "left_click", "target": label} for label in labels]
    if variant == "one":
        instruction = rng.choice([f"Turn on '{labels[0]}' in the Demo settings and save the change.",
                                  f"In the Demo settings, enable the option '{labels[0]}'."])
    elif variant == "two":
        instruction = f"In the Demo settings, turn on both '{labels[0]}' and '{labels[1]}', then save."
    else:
        size = rng.choice([n for n in range(8, 33) if n != state["font_size"]])
        changed["font_size"] = size
        steps += [size_field(state["font_size"]), {"action": "type", "text": str(size)}]
        instruction = f"In the Demo settings, enable '{labels[0]}' and set the font size to {size}; save both."
    return _settings_instance(rng, instruction, state, changed, steps, variant)


def replace_line(rng: random.Random) -> Instance:
    name = f"{rng.choice(LIST_FILES)}.txt"
    lines = rng.sample(ITEMS, rng.randint(3, 5))
    new = rng.choice([i for i in ITEMS if i not in lines])
    variant = rng.choice(["item", "ordinal", "last"])
    k = len(lines) - 1 if variant == "last" else rng.randrange(len(lines) - (variant == "ordinal"))
    if variant == "item":
        instruction = rng.choice([f"In the open Notes window, replace the line '{lines[k]}' with '{new}' and save.",
                                  f"Change {lines[k]} to {new} on my list in Notes and save it."])
    elif variant == "ordinal":
        instruction = f"In Notes, replace the {ORDINALS[k]} line of my list with '{new}' and save."
    else:
        instruction = f"Replace the last item on my list in Notes with {new} and save the file."
    return Instance(instruction, _notes_config(name, lines), _notes_check(name, lines[:k] + [new] + lines[k + 1:]),
                    [{"action": "left_click", "target": lines[k]}, {"action": "key", "keys": ["home"]},
                     {"action": "key", "keys": ["shift", "end"]}, {"action": "type", "text": new},
                     {"action": "key", "keys": ["ctrl", "s"]}, {"action": "terminate", "status": "success"}], "notes",
                    variant)


def _open_archive() -> list[dict]:
    return [{"action": "left_click", "target": "archive/"}, {"action": "left_click", "target": "Open"}]


def delete_file(rng: random.Random) -> Instance:
    variant = rng.choice(["name", "extension", "archived"])
    files = _folder(rng)
    archived: list[str] = []
    victim = rng.choice(files)
    if variant == "extension":
        ext = victim.rsplit(".", 1)[1]
        files = [f if f == victim or not f.endswith(f".{ext}") else
                 f"{_stem(f)}.{rng.choice([e for e in FILE_EXTS if e != ext])}" for f in files]
        instruction = f"Delete the only {EXT_WORDS[ext]} (.{ext}) in my docs folder."
    elif variant == "archived":
        files, archived = files[:3], files[3:]
        victim = rng.choice(archived)
        instruction = f"Delete {victim} from the archive folder inside my docs folder."
    else:
        instruction = rng.choice([f"Delete {victim} from my docs folder.",
                                  f"I don't need {victim} anymore: delete it from my docs folder."])
    steps = (_open_archive() if variant == "archived" else []) + [
        {"action": "left_click", "target": _stem(victim)}, {"action": "left_click", "target": "Delete"},
        {"action": "key", "keys": ["enter"]}, {"action": "terminate", "status": "success"}]
    kept = [f for f in files if f != victim] + [f"archive/{f}" for f in archived if f != victim]
    return Instance(instruction, _files_config(files, archived), _files_check(kept + ["archive"]), steps, "files",
                    variant)


def new_folder(rng: random.Random) -> Instance:
    files = _folder(rng)
    variant = rng.choice(["plain", "inside-archive", "two"])
    made = rng.sample([n for n in FOLDER_NAMES if n not in files], 2 if variant == "two" else 1)
    if variant == "plain":
        instruction = rng.choice([f"Make a new folder called '{made[0]}' in my docs folder.",
                                  f"Create a folder named {made[0]} in my docs folder."])
    elif variant == "inside-archive":
        instruction = f"Create a folder named {made[0]} inside the archive folder of my docs folder."
    else:
        instruction = f"Make two new folders in my docs folder: {made[0]} and {made[1]}."
    steps = _open_archive() if variant == "inside-archive" else []
    for folder in made:
        steps += [{"action": "left_click", "target": "New Folder"}, {"action": "type", "text": folder},
                  {"action": "key", "keys": ["enter"]}]
    where = "archive/" if variant == "inside-archive" else ""
    return Instance(instruction, _files_config(files), _files_check(files + ["archive"] + [where + m for m in made]),
                    steps + [{"action": "terminate", "status": "success"}], "files", variant)


def rename_file(rng: random.Random) -> Instance:
    files = _folder(rng)
    old = rng.choice(files)
    stem, ext = old.rsplit(".", 1)
    variant = rng.choice(["full", "extension", "prefix"])
    if variant == "full":
        new = old
        while new in files:
            new = f"{rng.choice(FILE_STEMS)}-final.{ext}"
        instruction = rng.choice([f"In the file manager, rename {old} in my docs folder to {new}.",
                                  f"Rename {old} to {new} (it is in my docs folder)."])
    elif variant == "extension":
        new_ext = rng.choice([e for e in FILE_EXTS if e != ext])
        new = f"{stem}.{new_ext}"
        instruction = f"Change the extension of {old} in my docs folder to .{new_ext}, keeping the rest of its name."
    else:
        prefix = rng.choice(PREFIXES)
        new = prefix + old
        instruction = f"Put '{prefix}' in front of the name of {old} in my docs folder."
    return Instance(instruction, _files_config(files), _files_check([f for f in files if f != old] + [new, "archive"]),
                    [{"action": "left_click", "target": _stem(old)}, {"action": "left_click", "target": "Rename"},
                     {"action": "key", "keys": ["ctrl", "a"]}, {"action": "type", "text": new},
                     {"action": "key", "keys": ["enter"]}, {"action": "terminate", "status": "success"}], "files",
                    variant)


def append_line(rng: random.Random) -> Instance:
    name = f"{rng.choice(LIST_FILES)}.txt"
    lines = rng.sample(ITEMS, rng.randint(3, 5))
    item = rng.choice([i for i in ITEMS if i not in lines])
    variant = rng.choice(["end", "start", "after"])
    if variant == "end":
        instruction = rng.choice([f"In the open Notes window, add a new last line that says '{item}' and save it.",
                                  f"Add {item} at the end of the list in Notes and save the file."])
        after = lines + [item]
        steps = [{"action": "left_click", "target": lines[-1]}, {"action": "key", "keys": ["ctrl", "end"]},
                 {"action": "type", "text": item}]
    elif variant == "start":
        instruction = f"Add {item} as the new first line of my list in Notes and save it."
        after = [item] + lines
        steps = [{"action": "left_click", "target": lines[0]}, {"action": "key", "keys": ["ctrl", "home"]},
                 {"action": "type", "text": item}, {"action": "key", "keys": ["enter"]}]
    else:
        k = rng.randrange(len(lines) - 1)
        instruction = f"In Notes, add {item} on a new line right after {lines[k]}, then save."
        after = lines[:k + 1] + [item] + lines[k + 1:]
        steps = [{"action": "left_click", "target": lines[k]}, {"action": "key", "keys": ["end"]},
                 {"action": "key", "keys": ["enter"]}, {"action": "type", "text": item}]
    return Instance(instruction, _notes_config(name, lines), _notes_check(name, after),
                    steps + [{"action": "key", "keys": ["ctrl", "s"]}, {"action": "terminate", "status": "success"}],
                    "notes", variant)


# ------------------------------------------------------------------------------------------------ held-out families


def turn_off(rng: random.Random) -> Instance:
    state = _settings(rng)
    key = rng.choice(["notifications", "line_numbers", "sounds"])
    state[key] = True
    label = CHECKS[key]
    return _settings_instance(rng, rng.choice([f"Turn off '{label}' in the Demo settings and save the change.",
                                               f"In the Demo settings, disable the option '{label}'."]),
                              state, {key: False}, [{"action": "left_click", "target": label}])


def theme(rng: random.Random) -> Instance:
    state = _settings(rng)
    target = rng.choice([t for t in THEMES if t != state["theme"]])
    return _settings_instance(rng, f"Switch the Demo app to the {THEMES[target]} theme and save.", state,
                              {"theme": target}, [{"action": "left_click", "target": THEMES[target]}])


def delete_two_files(rng: random.Random) -> Instance:
    files = _folder(rng)
    first, second = rng.sample(files, 2)
    steps = []
    for victim in (first, second):
        steps += [{"action": "left_click", "target": _stem(victim)}, {"action": "left_click", "target": "Delete"},
                  {"action": "key", "keys": ["enter"]}]
    return Instance(f"Delete both {first} and {second} from my docs folder.", _files_config(files),
                    _files_check([f for f in files if f not in (first, second)] + ["archive"]),
                    steps + [{"action": "terminate", "status": "success"}], "files")


def move_to_archive(rng: random.Random) -> Instance:
    files = _folder(rng)
    moved = rng.choice(files)
    return Instance(f"Move {moved} from my docs folder into the archive folder.",
                    _files_config(files), _files_check([f for f in files if f != moved] + ["archive",
                                                                                          f"archive/{moved}"]),
                    [{"action": "left_click", "target": _stem(moved)}, {"action": "left_click", "target": "Move"},
                     {"action": "type", "text": "archive"}, {"action": "key", "keys": ["enter"]},
                     {"action": "terminate", "status": "success"}], "files")


def remove_line(rng: random.Random) -> Instance:
    name = f"{rng.choice(LIST_FILES)}.txt"
    lines = rng.sample(ITEMS, rng.randint(3, 5))
    item = rng.choice(lines[:-1])  # not the last line: deleting it leaves a trailing newline to remove too
    return Instance(f"Take {item} off my list in Notes and save it.",
                    _notes_config(name, lines), _notes_check(name, [x for x in lines if x != item]),
                    [{"action": "left_click", "target": item}, {"action": "key", "keys": ["home"]},
                     {"action": "key", "keys": ["shift", "end"]}, {"action": "key", "keys": ["delete"]},
                     {"action": "key", "keys": ["delete"]}, {"action": "key", "keys": ["ctrl", "s"]},
                     {"action": "terminate", "status": "success"}], "notes")


def volume(rng: random.Random) -> Instance:
    state = _settings(rng)
    state["volume"] = rng.choice([20, 30, 40, 50])
    target = state["volume"] + 10 * rng.randint(1, 3)
    clicks = [{"action": "left_click", "target": "Volume", "offset": [220, 0]}] * ((target - state["volume"]) // 10)
    return _settings_instance(rng, f"Raise the volume in the Demo settings to {target} and save.", state,
                              {"volume": target}, clicks)


TRAIN_FAMILIES = [Family("display-name", display_name), Family("font-size", font_size), Family("turn-on", turn_on),
                  Family("replace-line", replace_line), Family("delete-file", delete_file), Family("new-folder", new_folder),
                  Family("rename-file", rename_file), Family("append-line", append_line)]
HELDOUT_FAMILIES = [Family("turn-off", turn_off), Family("theme", theme),
                    Family("delete-two-files", delete_two_files),
                    Family("move-to-archive", move_to_archive), Family("remove-line", remove_line),
                    Family("volume", volume)]
FAMILIES = {f.name: f for f in TRAIN_FAMILIES + HELDOUT_FAMILIES}


# ------------------------------------------------------------------------------------------------ writing


def identity(instance: Instance) -> str:
    return json.dumps([instance.instruction, instance.config], sort_keys=True)


def draw_instances(family: Family, count: int, seed: int, exclude: set[str]) -> list[Instance]:
    """`count` instances whose `identity` is not in `exclude` (nor repeated)."""
    return [instance for _, instance in draw_distinct(family.name, family.draw, identity, count, seed, exclude)]


def write_task(tasks: Path, family: Family, task_id: str, instance: Instance) -> str:
    folder = tasks / family.name
    folder.mkdir(parents=True, exist_ok=True)
    task = {"id": task_id, "snapshot": instance.app, "instruction": instance.instruction, "source": "slime-families",
            "related_apps": [instance.app], "config": instance.config, "evaluator": instance.evaluator,
            "variant": instance.variant}
    (folder / f"{task_id}.json").write_text(json.dumps(task, indent=1) + "\n")
    (folder / f"{task_id}.solution.json").write_text(json.dumps({"steps": instance.steps}, indent=1) + "\n")
    return f"{family.name}/{task_id}"


def write_families(out: Path, train_instances: int = 30, demo_share: float = 0.5, heldout_instances: int = 4,
                   seed: int = 0) -> dict[str, int]:
    """Writes `out/tasks/<family>/<family>-<t|h><k>.json` (and `.solution.json`) and the four data files."""
    def write(family: Family, tag: str, instance_seed: int, instance: Instance) -> dict:
        key = write_task(Path(out) / "tasks", family, f"{family.name}-{tag}", instance)
        return {"prompt": key, "label": "", "metadata": {"domain": family.name, "example_id": f"{family.name}-{tag}",
                                                         "instruction": instance.instruction,
                                                         "variant": instance.variant}}

    return write_family_set(Path(out), TRAIN_FAMILIES, HELDOUT_FAMILIES, identity, write, train_instances, demo_share,
                            heldout_instances, seed)


def family_of(key: str) -> str:
    """A task key `<family>/<id>` -> the family (its domain)."""
    return key.split("/")[0]


def main(argv: list[str] | None = None) -> None:
    task_families.main(__doc__.split("\n\n")[0], write_families, len(TRAIN_FAMILIES), len(HELDOUT_FAMILIES), 30, argv)


if __name__ == "__main__":
    main()
