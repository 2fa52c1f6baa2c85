"""Task families: kinds of shell task with many generated instances, written as ordinary task folders.

    python -m slime.agentic.terminal.families --out DIR [--train-instances 45] [--heldout-instances 4] [--seed 0]

A family draws an instance from a seed: its file names, data, parameters and wording, the expected outputs computed
here from the same data, one `solution.sh` that solves every instance of the family (checked per instance by
`python -m slime.agentic.terminal.check --tasks-dir DIR/tasks`, and again by the demonstrations, which keep only
instances whose tests passed) and tests that pin the answer. Each instance is a task folder in terminal-bench's
layout (`tasks.py`), so the service, the sealed grader and the turn loop treat it as any other task.

`TRAIN_FAMILIES` are trained on (demonstrations and RL draw disjoint instances from them); `HELDOUT_FAMILIES` are
whole kinds of task that no demonstration and no RL prompt uses: "unseen tasks". The written data files:

- `demos.jsonl`, `rl.jsonl`: training instances (the first `--demo-share` of each family's instances are for
  demonstrations, the rest for RL prompts);
- `heldout_instances.jsonl`: unseen instances of the training families (an instance whose instruction and files
  both equal a training instance's is drawn again);
- `heldout_tasks.jsonl`: instances of the held-out families.

The same seed writes the same folders and files, byte for byte.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from slime.agentic import task_families
from slime.agentic.task_families import draw_distinct, write_family_set

RUN_TESTS = """#!/bin/bash
# Runs this task's tests and writes pytest's JUnit XML report, which the harness reads for the reward.
set -u
PY="${PYTHON:-python3}"
TEST_DIR="${TEST_DIR:-/tests}"
exec "$PY" -m pytest -rA -p no:cacheprovider --junitxml="${JUNIT_XML:-$TEST_DIR/junit.xml}" "$TEST_DIR/test_outputs.py"
"""
AUTHOR = "slime terminal-rl families"

WORDS = ["alpha", "bravo", "cedar", "delta", "ember", "falcon", "garnet", "harbor", "indigo", "juniper", "kestrel",
         "lagoon", "maple", "nectar", "orchid", "pepper", "quartz", "raven", "sierra", "tundra", "umber", "violet",
         "willow", "yarrow", "zephyr", "basil", "comet", "dune", "fjord", "glacier"]
DIRS = ["data", "project", "docs", "reports", "assets", "work", "inbox", "archive", "notes", "src", "media", "logs"]
EXTS = ["txt", "log", "csv", "md", "json", "py", "tmp", "bak", "cfg", "dat"]
LEVELS = ["INFO", "DEBUG", "WARN", "ERROR"]
CITIES = ["oslo", "lima", "cairo", "delhi", "quito", "perth", "milan", "seoul", "dakar", "hanoi", "riga", "porto"]


@dataclass
class Instance:
    """One drawn task: what setup writes under /app, the instruction, the solution and the tests."""
    instruction: str
    files: dict[str, str]  # path relative to /app -> text
    solution: str  # bash, run in /app
    tests: dict[str, str]  # test function name -> body (indented by the writer)
    modes: dict[str, int] = field(default_factory=dict)  # path relative to /app -> chmod mode


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    draw: Callable[[random.Random], Instance]
    tags: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------------------ test snippets


def _answer_test(path: str, expected: str) -> str:
    """The file holds `expected` (surrounding whitespace ignored)."""
    return (f"p = Path({'/app/' + path!r})\n"
            f"assert p.is_file(), {('/app/' + path + ' was not created')!r}\n"
            f"assert p.read_text().strip() == {expected!r}, p.read_text()[:200]")


def _lines_test(path: str, expected: list[str]) -> str:
    """The file's non-empty lines (trailing spaces ignored) are exactly `expected`, in order."""
    return (f"p = Path({'/app/' + path!r})\n"
            f"assert p.is_file(), {('/app/' + path + ' was not created')!r}\n"
            f"got = [line.rstrip() for line in p.read_text().splitlines() if line.strip()]\n"
            f"assert got == {expected!r}, got[:20]")


FILES_UNDER = ("def files_under(root):\n"
               "    base = Path(root)\n"
               "    return sorted(str(p.relative_to(base)) for p in base.rglob('*') if p.is_file())\n")


def _pick(rng: random.Random, pool: list[str], k: int) -> list[str]:
    return rng.sample(pool, k)


def _log_lines(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(level, line) pairs of a service log; messages mention other levels' words so a plain grep of the word
    over-counts."""
    messages = ["request served in {n} ms", "cache warmed with {n} keys", "retry {n} after timeout",
                "no error in shard {n}", "worker {n} restarted", "debug dump of batch {n} skipped",
                "user {n} signed in", "queue depth {n}", "warn threshold {n} not reached", "disk at {n} percent"]
    out = []
    for i in range(n):
        level = rng.choices(LEVELS, weights=[5, 3, 2, 2])[0]
        out.append((level, f"2024-05-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
                           f"{rng.randint(0, 59):02d} [{level}] {rng.choice(messages).format(n=rng.randint(1, 999))}"))
    return out


def _tree(rng: random.Random, root: str, exts: list[str], count: int) -> dict[str, str]:
    """`count` files with the given extensions under root/, some in subfolders, unique names."""
    files: dict[str, str] = {}
    subdirs = ["", "", "old", "2024", "misc/deep"]
    while len(files) < count:
        name = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}.{rng.choice(exts)}"
        sub = rng.choice(subdirs)
        path = f"{root}/{sub}/{name}" if sub else f"{root}/{name}"
        files.setdefault(path, f"{name} {rng.randint(0, 10**6)}\n")
    return files


# ------------------------------------------------------------------------------------------------ training families


def count_level_lines(rng: random.Random) -> Instance:
    log, out, level = f"{rng.choice(['app', 'server', 'worker', 'api'])}.log", rng.choice(["answer.txt", "count.txt"]), \
        rng.choice(LEVELS)
    lines = _log_lines(rng, rng.randint(40, 120))
    expected = sum(1 for lvl, _ in lines if lvl == level)
    return Instance(
        instruction=(f"The log /app/{log} has one entry per line with the level in square brackets, e.g. [{level}]. "
                     f"How many lines have the level {level}? Write just the number to /app/{out}."),
        files={log: "".join(line + "\n" for _, line in lines)},
        solution=f"grep -c '\\[{level}\\]' /app/{log} > /app/{out}",
        tests={"test_count": _answer_test(out, str(expected))})


def sum_csv_column(rng: random.Random) -> Instance:
    cols = _pick(rng, ["price", "qty", "weight", "score", "hours", "cost", "visits"], 3)
    col, csv_name, out = rng.choice(cols), f"{rng.choice(['sales', 'orders', 'stats', 'items'])}.csv", "total.txt"
    rows = [[rng.choice(CITIES)] + [str(rng.randint(1, 500)) for _ in cols] for _ in range(rng.randint(8, 25))]
    text = "name," + ",".join(cols) + "\n" + "".join(",".join(r) + "\n" for r in rows)
    k = cols.index(col) + 1
    expected = sum(int(r[k]) for r in rows)
    return Instance(
        instruction=f"/app/{csv_name} is a CSV file with a header line. Write the sum of its column \"{col}\" "
                    f"(all rows) to /app/{out}, just the number.",
        files={csv_name: text},
        solution=(f"awk -F, -v col={col} 'NR==1 {{for (i=1; i<=NF; i++) if ($i==col) k=i; next}} {{s+=$k}} "
                  f"END {{print s}}' /app/{csv_name} > /app/{out}"),
        tests={"test_sum": _answer_test(out, str(expected))})


def list_by_extension(rng: random.Random) -> Instance:
    root, exts = rng.choice(DIRS), _pick(rng, EXTS, 3)
    ext, out = exts[0], rng.choice(["list.txt", "found.txt", "files.txt"])
    files = _tree(rng, root, exts, rng.randint(8, 16))
    files.setdefault(f"{root}/{rng.choice(WORDS)}_extra.{ext}", "x\n")
    expected = sorted(p[len(root) + 1:] for p in files if p.endswith("." + ext))
    return Instance(
        instruction=(f"List every file ending in .{ext} anywhere under /app/{root} (subfolders too) into /app/{out}: "
                     f"one path per line, relative to /app/{root} (e.g. sub/name.{ext}), sorted."),
        files=files,
        solution=f"cd /app/{root} && find . -type f -name '*.{ext}' | sed 's|^\\./||' | sort > /app/{out}",
        tests={"test_list": _lines_test(out, expected)})


def replace_word(rng: random.Random) -> Instance:
    old, new = _pick(rng, WORDS, 2)
    name = f"{rng.choice(['notes', 'readme', 'letter', 'plan'])}.txt"
    others = [w for w in WORDS if w not in (old, new)]
    lines = []
    for _ in range(rng.randint(6, 14)):
        words = rng.sample(others, 4) + ([old] * rng.randint(0, 2))
        rng.shuffle(words)
        lines.append(" ".join(words))
    if not any(old in line for line in lines):
        lines[0] += " " + old
    text = "".join(line + "\n" for line in lines)
    return Instance(
        instruction=f"In /app/{name}, replace every occurrence of the word \"{old}\" with \"{new}\". Change nothing else.",
        files={name: text},
        solution=f"sed -i 's/{old}/{new}/g' /app/{name}",
        tests={"test_replaced": (f"assert Path({'/app/' + name!r}).read_text() == {text.replace(old, new)!r}")})


def run_script_output(rng: random.Random) -> Instance:
    script, out, word, n = f"{rng.choice(['build', 'report', 'greet', 'stamp'])}.sh", \
        f"{rng.choice(['output', 'result'])}.txt", rng.choice(WORDS), rng.randint(2, 6)
    body = f"#!/bin/bash\nfor i in $(seq 1 {n}); do echo \"{word} $i\"; done\n"
    return Instance(
        instruction=(f"/app/{script} cannot be run yet because it is not executable. Make it executable, run it, and "
                     f"save what it prints to /app/{out}."),
        files={script: body}, modes={script: 0o644},
        solution=f"chmod +x /app/{script} && /app/{script} > /app/{out}",
        tests={"test_executable": f"assert os.stat({'/app/' + script!r}).st_mode & 0o100",
               "test_output": _lines_test(out, [f"{word} {i}" for i in range(1, n + 1)])})


def distinct_values(rng: random.Random) -> Instance:
    csv_name, col, out = f"{rng.choice(['visits', 'trips', 'events'])}.csv", rng.choice(["city", "place"]), \
        rng.choice(["cities.txt", "distinct.txt"])
    cities = _pick(rng, CITIES, rng.randint(3, 7))
    rows = [(rng.randint(1, 9999), rng.choice(cities), rng.randint(1, 50)) for _ in range(rng.randint(12, 30))]
    text = f"id,{col},amount\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    return Instance(
        instruction=(f"Write the distinct values of the \"{col}\" column of /app/{csv_name} (a CSV file with a header "
                     f"line) to /app/{out}: each value once, one per line, sorted alphabetically."),
        files={csv_name: text},
        solution=f"tail -n +2 /app/{csv_name} | cut -d, -f2 | sort -u > /app/{out}",
        tests={"test_values": _lines_test(out, sorted({b for _, b, _ in rows}))})


def json_get_value(rng: random.Random) -> Instance:
    name, section = f"{rng.choice(['config', 'settings', 'app'])}.json", rng.choice(["server", "database", "cache"])
    keys = _pick(rng, ["port", "host", "timeout", "user", "retries", "region"], 4)
    data = {section: {k: (rng.randint(1, 9000) if k in ("port", "timeout", "retries") else rng.choice(CITIES))
                      for k in keys}, "version": rng.randint(1, 9)}
    key, out = rng.choice(keys), "value.txt"
    return Instance(
        instruction=(f"/app/{name} is a JSON file. Write the value of \"{key}\" inside the \"{section}\" object to "
                     f"/app/{out}, just the value."),
        files={name: json.dumps(data, indent=2) + "\n"},
        solution=(f"python3 -c \"import json; print(json.load(open('/app/{name}'))['{section}']['{key}'])\" "
                  f"> /app/{out}"),
        tests={"test_value": _answer_test(out, str(data[section][key]))})


def delete_by_extension(rng: random.Random) -> Instance:
    root, exts = rng.choice(DIRS), _pick(rng, EXTS, 3)
    ext = exts[0]
    files = _tree(rng, root, exts, rng.randint(8, 16))
    files.setdefault(f"{root}/{rng.choice(WORDS)}_junk.{ext}", "junk\n")
    keep = sorted(p[len(root) + 1:] for p in files if not p.endswith("." + ext))
    return Instance(
        instruction=f"Delete every file ending in .{ext} under /app/{root}, in subfolders too. Keep all other files.",
        files=files,
        solution=f"find /app/{root} -type f -name '*.{ext}' -delete",
        tests={"test_kept": f"assert files_under('/app/{root}') == {keep!r}"})


def make_archive(rng: random.Random) -> Instance:
    root, name = rng.choice(DIRS), f"{rng.choice(['backup', 'bundle', 'snapshot'])}.tar.gz"
    files = _tree(rng, root, _pick(rng, EXTS, 3), rng.randint(4, 9))
    expected = sorted(files)
    return Instance(
        instruction=(f"Create a gzip-compressed tar archive /app/{name} of the folder /app/{root}. Paths inside the "
                     f"archive must start with \"{root}/\"."),
        files=files,
        solution=f"tar -czf /app/{name} -C /app {root}",
        tests={"test_archive": (f"with tarfile.open({'/app/' + name!r}, 'r:gz') as t:\n"
                                f"    got = sorted(m.name for m in t.getmembers() if m.isfile())\n"
                                f"assert got == {expected!r}, got")})


def first_lines(rng: random.Random) -> Instance:
    name, n, out = f"{rng.choice(['words', 'names', 'items'])}.txt", rng.randint(3, 9), \
        rng.choice(["head.txt", "top.txt", "first.txt"])
    lines = [f"{rng.choice(WORDS)} {rng.randint(1, 999)}" for _ in range(rng.randint(15, 30))]
    return Instance(
        instruction=f"Write the first {n} lines of /app/{name} to /app/{out}.",
        files={name: "".join(line + "\n" for line in lines)},
        solution=f"head -n {n} /app/{name} > /app/{out}",
        tests={"test_lines": _lines_test(out, lines[:n])})


def rename_extension(rng: random.Random) -> Instance:
    root = rng.choice(DIRS)
    old, new = _pick(rng, ["txt", "md", "text", "log", "dat", "csv"], 2)
    names = sorted({f"{w}.{old}" for w in rng.sample(WORDS, rng.randint(3, 7))})
    other = f"{rng.choice(WORDS)}_keep.cfg"
    files = {f"{root}/{n}": f"{n}\n" for n in names} | {f"{root}/{other}": "keep\n"}
    expected = sorted([n[: -len(old)] + new for n in names] + [other])
    return Instance(
        instruction=(f"In /app/{root}, rename every file ending in .{old} so that it ends in .{new} instead "
                     f"(report.{old} becomes report.{new}). Leave other files alone."),
        files=files,
        solution=f"cd /app/{root} && for f in *.{old}; do mv \"$f\" \"${{f%.{old}}}.{new}\"; done",
        tests={"test_names": f"assert files_under('/app/{root}') == {expected!r}"})


def count_files(rng: random.Random) -> Instance:
    root, out = rng.choice(DIRS), rng.choice(["count.txt", "answer.txt"])
    files = _tree(rng, root, _pick(rng, EXTS, 3), rng.randint(5, 20))
    return Instance(
        instruction=(f"How many files are there in /app/{root}, counting its subfolders too (folders themselves do "
                     f"not count)? Write just the number to /app/{out}."),
        files=files,
        solution=f"find /app/{root} -type f | wc -l > /app/{out}",
        tests={"test_count": _answer_test(out, str(len(files)))})


# ------------------------------------------------------------------------------------------------ held-out families


def count_lines(rng: random.Random) -> Instance:
    name, out = f"{rng.choice(['names', 'hosts', 'queue'])}.txt", rng.choice(["lines.txt", "answer.txt"])
    n = rng.randint(10, 80)
    return Instance(
        instruction=f"How many lines does /app/{name} have? Write just the number to /app/{out}.",
        files={name: "".join(f"{rng.choice(WORDS)}-{i}\n" for i in range(n))},
        solution=f"wc -l < /app/{name} > /app/{out}",
        tests={"test_count": _answer_test(out, str(n))})


def copy_by_extension(rng: random.Random) -> Instance:
    src, dst = _pick(rng, DIRS, 2)
    exts = _pick(rng, EXTS, 3)
    ext = exts[0]
    files = {f"{src}/{rng.choice(WORDS)}_{i}.{rng.choice(exts)}": f"{i}\n" for i in range(rng.randint(6, 12))}
    files.setdefault(f"{src}/{rng.choice(WORDS)}_x.{ext}", "x\n")
    picked = sorted(p[len(src) + 1:] for p in files if p.endswith("." + ext))
    return Instance(
        instruction=(f"Copy every .{ext} file from /app/{src} into a new folder /app/{dst} (the files directly in "
                     f"/app/{src}). Leave /app/{src} as it is."),
        files=files,
        solution=f"mkdir -p /app/{dst} && cp /app/{src}/*.{ext} /app/{dst}/",
        tests={"test_copied_and_source_kept": f"assert files_under('/app/{dst}') == {picked!r}\n"
                                              f"assert len(files_under('/app/{src}')) == {len(files)}"})


def max_row(rng: random.Random) -> Instance:
    csv_name, col, out = f"{rng.choice(['scores', 'results'])}.csv", rng.choice(["points", "score", "time"]), "best.txt"
    names = _pick(rng, WORDS, rng.randint(5, 12))
    values = rng.sample(range(1, 1000), len(names))
    text = f"name,{col}\n" + "".join(f"{n},{v}\n" for n, v in zip(names, values))
    best = names[values.index(max(values))]
    return Instance(
        instruction=(f"/app/{csv_name} is a CSV file with a header line. Which row has the largest \"{col}\"? Write "
                     f"that row's name to /app/{out}."),
        files={csv_name: text},
        solution=f"tail -n +2 /app/{csv_name} | sort -t, -k2 -n -r | head -n 1 | cut -d, -f1 > /app/{out}",
        tests={"test_best": _answer_test(out, best)})


def set_mode(rng: random.Random) -> Instance:
    name = f"{rng.choice(['secrets', 'keys', 'token'])}.{rng.choice(['txt', 'env', 'cfg'])}"
    mode = rng.choice([0o600, 0o640, 0o400, 0o644, 0o700])
    return Instance(
        instruction=f"Set the permissions of /app/{name} to {mode:o} (octal).",
        files={name: "KEY=value\n"}, modes={name: 0o666 if mode != 0o666 else 0o644},
        solution=f"chmod {mode:o} /app/{name}",
        tests={"test_mode": f"assert os.stat({'/app/' + name!r}).st_mode & 0o777 == {mode}"})


def last_lines(rng: random.Random) -> Instance:
    name, n, out = f"{rng.choice(['events', 'journal', 'history'])}.log", rng.randint(3, 9), \
        rng.choice(["tail.txt", "last.txt"])
    lines = [f"{rng.choice(WORDS)} {rng.randint(1, 999)}" for _ in range(rng.randint(15, 30))]
    return Instance(
        instruction=f"Write the last {n} lines of /app/{name} to /app/{out}.",
        files={name: "".join(line + "\n" for line in lines)},
        solution=f"tail -n {n} /app/{name} > /app/{out}",
        tests={"test_lines": _lines_test(out, lines[-n:])})


def count_word(rng: random.Random) -> Instance:
    name, word, out = f"{rng.choice(['story', 'essay', 'speech'])}.txt", rng.choice(WORDS), "count.txt"
    others = [w for w in WORDS if w != word]
    lines = [" ".join(rng.choice(others + [word]) for _ in range(rng.randint(3, 8))) for _ in range(rng.randint(8, 20))]
    expected = sum(line.split().count(word) for line in lines)
    return Instance(
        instruction=(f"How many times does the word \"{word}\" occur in /app/{name} (count every occurrence, also "
                     f"several on one line)? Write just the number to /app/{out}."),
        files={name: "".join(line + "\n" for line in lines)},
        solution=f"grep -o '\\b{word}\\b' /app/{name} | wc -l > /app/{out}",
        tests={"test_count": _answer_test(out, str(expected))})


TRAIN_FAMILIES = [
    Family("count-level-lines", "log-analysis", count_level_lines, ("grep",)),
    Family("sum-csv-column", "csv-json", sum_csv_column, ("awk", "csv")),
    Family("list-by-extension", "files", list_by_extension, ("find", "sort")),
    Family("replace-word", "text", replace_word, ("sed",)),
    Family("run-script-output", "permissions", run_script_output, ("chmod",)),
    Family("distinct-values", "csv-json", distinct_values, ("cut", "sort")),
    Family("json-get-value", "csv-json", json_get_value, ("json", "python")),
    Family("delete-by-extension", "files", delete_by_extension, ("find",)),
    Family("make-archive", "archives", make_archive, ("tar",)),
    Family("first-lines", "text", first_lines, ("head",)),
    Family("rename-extension", "files", rename_extension, ("mv",)),
    Family("count-files", "files", count_files, ("find", "wc")),
]
HELDOUT_FAMILIES = [
    Family("count-lines", "text", count_lines, ("wc",)),
    Family("copy-by-extension", "files", copy_by_extension, ("cp",)),
    Family("max-row", "csv-json", max_row, ("sort", "csv")),
    Family("set-mode", "permissions", set_mode, ("chmod",)),
    Family("last-lines", "text", last_lines, ("tail",)),
    Family("count-word", "text", count_word, ("grep", "wc")),
]
FAMILIES = {f.name: f for f in TRAIN_FAMILIES + HELDOUT_FAMILIES}


# ------------------------------------------------------------------------------------------------ writing


def setup_script(instance: Instance) -> str:
    """setup.sh: writes the instance's files under /app (as JSON in a Python heredoc: no quoting to get wrong)."""
    payload = json.dumps({"files": instance.files, "modes": instance.modes}, sort_keys=True)
    return ("#!/bin/bash\nset -euo pipefail\npython3 - <<'PY'\nimport json, os\n"
            f"spec = json.loads({payload!r})\n"
            "for rel, text in spec['files'].items():\n"
            "    path = os.path.join('/app', rel)\n"
            "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
            "    with open(path, 'w') as f:\n"
            "        f.write(text)\n"
            "for rel, mode in spec['modes'].items():\n"
            "    os.chmod(os.path.join('/app', rel), mode)\n"
            "PY\n")


def tests_module(instance: Instance) -> str:
    head = "import os\nimport tarfile\nfrom pathlib import Path\n\n\n" + FILES_UNDER
    bodies = "".join(f"\n\ndef {name}():\n" + "".join(f"    {line}\n" for line in body.splitlines())
                     for name, body in instance.tests.items())
    return head + bodies


def write_task(root: Path, name: str, family: Family, instance: Instance, seed: int) -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True, exist_ok=True)
    meta = {"instruction": instance.instruction, "category": family.category, "difficulty": "easy",
            "tags": list(family.tags), "author": AUTHOR, "max_test_timeout_sec": 30, "family": family.name,
            "seed": seed}
    (folder / "task.yaml").write_text(yaml.safe_dump(meta, sort_keys=False, width=120))
    (folder / "setup.sh").write_text(setup_script(instance))
    (folder / "solution.sh").write_text(f"#!/bin/bash\n{instance.solution}\n")
    (folder / "run-tests.sh").write_text(RUN_TESTS)
    (folder / "tests" / "test_outputs.py").write_text(tests_module(instance))
    return folder


def identity(instance: Instance) -> str:
    """What makes two instances the same task: the instruction and the files it is about."""
    return json.dumps([instance.instruction, instance.files, instance.modes], sort_keys=True)


def draw_instances(family: Family, count: int, seed: int, exclude: set[str]) -> list[tuple[int, Instance]]:
    """`count` (instance seed, instance) pairs whose `identity` is not in `exclude` (nor repeated)."""
    return draw_distinct(family.name, family.draw, identity, count, seed, exclude)


def write_families(out: Path, train_instances: int = 45, demo_share: float = 0.5, heldout_instances: int = 4,
                   seed: int = 0) -> dict[str, int]:
    """Writes `out/tasks/<family>-<t|h><k>/` and the four data files; returns the count per data file."""
    def write(family: Family, tag: str, instance_seed: int, instance: Instance) -> dict:
        name = f"{family.name}-{tag}"
        write_task(Path(out) / "tasks", name, family, instance, instance_seed)
        return {"task": {"task_name": name, "task_path": name, "instruction": instance.instruction,
                         "data_source": "terminal_bench", "family": family.name}}

    return write_family_set(Path(out), TRAIN_FAMILIES, HELDOUT_FAMILIES, identity, write, train_instances, demo_share,
                            heldout_instances, seed)


def family_of(task_key: str) -> str:
    """A task key or folder name "<family>-<t|h><k>" (with an optional ":<path>") -> the family's name."""
    name = task_key.split(":")[0]
    return name.rsplit("-", 1)[0] if name.rsplit("-", 1)[-1][:1] in "th" and name[-3:].isdigit() else name


def main(argv: list[str] | None = None) -> None:
    task_families.main(__doc__.split("\n\n")[0], write_families, len(TRAIN_FAMILIES), len(HELDOUT_FAMILIES), 45, argv)


if __name__ == "__main__":
    main()
