"""Task families: kinds of shell task with many generated instances, written as ordinary task folders.

    python terminal-rl/terminal_families.py --out DIR [--train-instances 45] [--heldout-instances 4] [--seed 0]

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
import re
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
    variant: str = ""  # which way of asking the family's task this instance uses (task.yaml's `variant`)


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
# Each training family has several variants: the same kind of task asked in ways that need different commands (a
# filter, the opposite selection, another output shape, a separator to notice). A model that learned one template per
# family fails the other variants: the warm start leaves room, and RL gets groups with mixed outcomes to learn from.
# The variant is recorded on the instance (task.yaml's `variant`), so results can be read per variant.

CSV_PRE = "awk -F'{sep}' -v col={col} 'NR==1 {{for (i=1; i<=NF; i++) if ($i==col) k=i; next}} "  # the column by name


def count_level_lines(rng: random.Random) -> Instance:
    log, out = f"{rng.choice(['app', 'server', 'worker', 'api'])}.log", rng.choice(["answer.txt", "count.txt", "n.txt"])
    lines = _log_lines(rng, rng.randint(40, 120))
    present = sorted({lvl for lvl, _ in lines})
    level, other = _pick(rng, present, 2)
    intro = (f"The log /app/{log} has one entry per line: a date, a time, the level in square brackets (e.g. "
             f"[{level}]) and a message.")
    variant = rng.choice(["level", "day", "either", "not", "word"])
    if variant == "level":
        ask, expected = f"How many lines have the level {level}?", sum(lvl == level for lvl, _ in lines)
        solution = f"grep -c '\\[{level}\\]' /app/{log}"
    elif variant == "day":
        day = rng.choice([line[:10] for lvl, line in lines if lvl == level])
        ask = f"How many {level} lines were logged on {day}?"
        expected = sum(lvl == level and line.startswith(day) for lvl, line in lines)
        solution = f"grep '^{day} ' /app/{log} | grep -c '\\[{level}\\]'"
    elif variant == "either":
        ask = f"How many lines have the level {level} or the level {other}?"
        expected = sum(lvl in (level, other) for lvl, _ in lines)
        solution = f"grep -cE '\\[({level}|{other})\\]' /app/{log}"
    elif variant == "not":
        ask, expected = f"How many lines do NOT have the level {level}?", sum(lvl != level for lvl, _ in lines)
        solution = f"grep -vc '\\[{level}\\]' /app/{log}"
    else:
        word = rng.choice([line.split("] ")[1].split()[0] for lvl, line in lines if lvl == level])
        ask = f"How many {level} lines have a message that starts with the word \"{word}\"?"
        expected = sum(lvl == level and line.split("] ")[1].startswith(word + " ") for lvl, line in lines)
        solution = f"grep -c '\\[{level}\\] {word} ' /app/{log}"
    return Instance(instruction=f"{intro} {ask} Write just the number to /app/{out}.",
                    files={log: "".join(line + "\n" for _, line in lines)}, solution=f"{solution} > /app/{out}",
                    tests={"test_count": _answer_test(out, str(expected))}, variant=variant)


def sum_csv_column(rng: random.Random) -> Instance:
    cols = _pick(rng, ["price", "qty", "weight", "score", "hours", "cost", "visits"], 3)
    col, csv_name, out = rng.choice(cols), f"{rng.choice(['sales', 'orders', 'stats', 'items'])}.csv", \
        rng.choice(["total.txt", "result.txt", "answer.txt"])
    sep = rng.choice([",", ",", ";"])
    rows = [[rng.choice(CITIES)] + [str(rng.randint(1, 500)) for _ in cols] for _ in range(rng.randint(8, 25))]
    text = sep.join(["name", *cols]) + "\n" + "".join(sep.join(r) + "\n" for r in rows)
    values = [int(r[cols.index(col) + 1]) for r in rows]
    kind = "a CSV file" if sep == "," else "a semicolon-separated file (fields separated by ;)"
    pre = CSV_PRE.format(sep=sep, col=col)
    variant = rng.choice(["sum", "sum-where", "max", "min", "count-over"])
    if variant == "sum":
        ask, expected, prog = f"the sum of its column \"{col}\" (all rows)", sum(values), "{s+=$k} END {print s}'"
    elif variant == "sum-where":
        city = rng.choice(rows)[0]
        ask = f"the sum of its column \"{col}\" over the rows whose name is \"{city}\""
        expected = sum(v for r, v in zip(rows, values) if r[0] == city)
        prog = f"$1==\"{city}\" {{s+=$k}} END {{print s+0}}'"
    elif variant == "max":
        ask, expected, prog = f"the largest value in its column \"{col}\"", max(values), \
            "m==\"\" || $k+0>m+0 {m=$k} END {print m}'"
    elif variant == "min":
        ask, expected, prog = f"the smallest value in its column \"{col}\"", min(values), \
            "m==\"\" || $k+0<m+0 {m=$k} END {print m}'"
    else:
        n = rng.choice(sorted(values)[1:-1] or values)
        ask = f"how many rows have a \"{col}\" greater than {n}"
        expected, prog = sum(v > n for v in values), f"$k>{n} {{c++}} END {{print c+0}}'"
    return Instance(
        instruction=f"/app/{csv_name} is {kind} with a header line. Write {ask} to /app/{out}, just the number.",
        files={csv_name: text}, solution=f"{pre}{prog} /app/{csv_name} > /app/{out}",
        tests={"test_answer": _answer_test(out, str(expected))}, variant=variant)


def list_by_extension(rng: random.Random) -> Instance:
    root, exts = rng.choice(DIRS), _pick(rng, EXTS, 3)
    ext, out = exts[0], rng.choice(["list.txt", "found.txt", "files.txt"])
    files = _tree(rng, root, exts, rng.randint(8, 16))
    files.setdefault(f"{root}/{rng.choice(WORDS)}_extra.{ext}", "x\n")
    matching = [p for p in files if p.endswith("." + ext)]
    variant = rng.choice(["relative", "top-level", "names", "absolute"])
    find = f"find /app/{root} -type f -name '*.{ext}'"
    if variant == "relative":
        shape = f"anywhere under /app/{root} (subfolders too) into /app/{out}: one path per line, relative to " \
                f"/app/{root} (e.g. sub/name.{ext}), sorted"
        expected = sorted(p[len(root) + 1:] for p in matching)
        solution = f"cd /app/{root} && find . -type f -name '*.{ext}' | sed 's|^\\./||' | sort"
    elif variant == "top-level":
        shape = f"directly in /app/{root} (not in its subfolders) into /app/{out}: one file name per line, sorted"
        expected = sorted(p[len(root) + 1:] for p in matching if "/" not in p[len(root) + 1:])
        solution = f"find /app/{root} -maxdepth 1 -type f -name '*.{ext}' -printf '%f\\n' | sort"
    elif variant == "names":
        shape = f"anywhere under /app/{root} (subfolders too) into /app/{out}: just the file names, without their " \
                f"folders, one per line, sorted"
        expected = sorted(p.rsplit("/", 1)[1] for p in matching)
        solution = f"{find} -printf '%f\\n' | sort"
    else:
        shape = f"anywhere under /app/{root} (subfolders too) into /app/{out}: one absolute path per line (starting " \
                f"with /app/), sorted"
        expected = sorted("/app/" + p for p in matching)
        solution = f"{find} | sort"
    return Instance(instruction=f"List every file ending in .{ext} {shape}.", files=files,
                    solution=f"{solution} > /app/{out}", tests={"test_list": _lines_test(out, expected)},
                    variant=variant)


def replace_word(rng: random.Random) -> Instance:
    old, new, marker = _pick(rng, WORDS, 3)
    name = f"{rng.choice(['notes', 'readme', 'letter', 'plan'])}.txt"
    others = [w for w in WORDS if w not in (old, new, marker)]
    variant = rng.choice(["all", "whole-word", "lines-with", "first-per-line"])
    longer = [old + "s", old + "wood"] if variant == "whole-word" else []
    lines = []
    for i in range(rng.randint(6, 14)):
        words = rng.sample(others, 4) + [old] * rng.randint(0, 2) + ([marker] if i % 2 else []) \
            + ([rng.choice(longer)] if longer and rng.random() < 0.4 else [])
        rng.shuffle(words)
        lines.append(" ".join(words))
    lines[0], lines[1] = f"{old} {lines[0]} {old}", f"{old} {lines[1]}"  # some line holds two, a marker line one
    text = "".join(line + "\n" for line in lines)
    if variant == "all":
        ask, after, solution = "", text.replace(old, new), f"sed -i 's/{old}/{new}/g' /app/{name}"
    elif variant == "whole-word":
        text += f"{old}s and {old}wood stay\n"
        ask = f" Only whole words: longer words that contain it (such as \"{old}s\") stay as they are."
        after = re.sub(rf"\b{old}\b", new, text)
        solution = f"sed -i 's/\\b{old}\\b/{new}/g' /app/{name}"
    elif variant == "lines-with":
        ask = f" Only on lines that contain the word \"{marker}\"; other lines stay as they are."
        after = "".join((line.replace(old, new) if marker in line.split() else line) + "\n" for line in lines)
        solution = f"sed -i '/\\b{marker}\\b/s/{old}/{new}/g' /app/{name}"
    else:
        ask = " Only its first occurrence on each line: later ones on the same line stay as they are."
        after = "".join(line.replace(old, new, 1) + "\n" for line in lines)
        solution = f"sed -i 's/{old}/{new}/' /app/{name}"
    return Instance(
        instruction=f"In /app/{name}, replace the word \"{old}\" with \"{new}\".{ask} Change nothing else.",
        files={name: text}, solution=solution,
        tests={"test_replaced": f"assert Path({'/app/' + name!r}).read_text() == {after!r}"}, variant=variant)


def run_script_output(rng: random.Random) -> Instance:
    script, out, word, n = f"{rng.choice(['build', 'report', 'greet', 'stamp'])}.sh", \
        f"{rng.choice(['output', 'result', 'log'])}.txt", rng.choice(WORDS), rng.randint(2, 6)
    variant = rng.choice(["run", "argument", "last-line", "with-errors"])
    loop = f"for i in $(seq 1 {n}); do echo \"{word} $i\"; done"
    lines = [f"{word} {i}" for i in range(1, n + 1)]
    run, how, ask = f"/app/{script}", "run it", "save what it prints to"
    if variant == "argument":
        loop = f"for i in $(seq 1 \"${{1:?give a count}}\"); do echo \"{word} $i\"; done"
        m = rng.randint(3, 9)
        lines, run, how = [f"{word} {i}" for i in range(1, m + 1)], f"/app/{script} {m}", \
            f"run it with the argument {m}"
    elif variant == "last-line":
        lines, run, ask = lines[-1:], f"/app/{script} | tail -n 1", "save only the last line it prints to"
    elif variant == "with-errors":
        loop += f"\necho \"{word} done\" >&2"
        lines = lines + [f"{word} done"]
        ask = "save everything it prints, standard output and standard error, to"
    return Instance(
        instruction=(f"/app/{script} cannot be run yet because it is not executable. Make it executable, {how}, "
                     f"and {ask} /app/{out}."),
        files={script: f"#!/bin/bash\n{loop}\n"}, modes={script: 0o644},
        solution=f"chmod +x /app/{script} && {run} > /app/{out}" + (" 2>&1" if variant == "with-errors" else ""),
        tests={"test_executable": f"assert os.stat({'/app/' + script!r}).st_mode & 0o100",
               "test_output": _lines_test(out, lines)}, variant=variant)


def distinct_values(rng: random.Random) -> Instance:
    csv_name, col, out = f"{rng.choice(['visits', 'trips', 'events'])}.csv", rng.choice(["city", "place"]), \
        rng.choice(["cities.txt", "distinct.txt", "answer.txt"])
    cities = _pick(rng, CITIES, rng.randint(3, 7))
    header = ["id", col, "amount"]
    rng.shuffle(header)
    rows = [{"id": str(rng.randint(1, 9999)), col: rng.choice(cities), "amount": str(rng.randint(1, 50))}
            for _ in range(rng.randint(12, 30))]
    text = ",".join(header) + "\n" + "".join(",".join(r[h] for h in header) + "\n" for r in rows)
    values = [r[col] for r in rows]
    counts = {v: values.count(v) for v in sorted(set(values))}
    top = max(counts.values())
    variant = rng.choice(["distinct", "count-distinct", "most-common", "counts"])
    if variant == "most-common" and list(counts.values()).count(top) > 1:
        variant = "counts"  # a tie has no single most common value
    column = CSV_PRE.format(sep=",", col=col) + f"{{print $k}}' /app/{csv_name}"
    if variant == "distinct":
        ask, expected, tail = "the distinct values of the \"{col}\" column of {f} to {out}: each value once, one per " \
                              "line, sorted alphabetically", sorted(counts), "sort -u"
    elif variant == "count-distinct":
        ask, expected, tail = "how many different values the \"{col}\" column of {f} has to {out}, just the number", \
            [str(len(counts))], "sort -u | wc -l"
    elif variant == "most-common":
        ask = "the value that occurs most often in the \"{col}\" column of {f} to {out}, just the value"
        expected, tail = [max(counts, key=counts.get)], "sort | uniq -c | sort -rn | head -n 1 | awk '{print $2}'"
    else:
        ask = "each distinct value of the \"{col}\" column of {f} with how often it occurs to {out}: one line per " \
              "value, the value, a space and the count (e.g. \"oslo 3\"), sorted by value"
        expected, tail = [f"{v} {c}" for v, c in counts.items()], "sort | uniq -c | awk '{print $2, $1}'"
    return Instance(
        instruction=(f"/app/{csv_name} is a CSV file with a header line. Write "
                     + ask.format(col=col, f=f"/app/{csv_name}", out=f"/app/{out}") + "."),
        files={csv_name: text}, solution=f"{column} | {tail} > /app/{out}",
        tests={"test_values": _lines_test(out, expected)}, variant=variant)


def json_get_value(rng: random.Random) -> Instance:
    name, out = f"{rng.choice(['config', 'settings', 'app'])}.json", rng.choice(["value.txt", "answer.txt"])
    section = rng.choice(["server", "database", "cache"])
    keys = _pick(rng, ["port", "host", "timeout", "user", "retries", "region"], 4)
    group, item_names = rng.choice(["servers", "workers", "nodes"]), _pick(rng, WORDS, rng.randint(3, 6))
    items = [{"name": n, "port": rng.randint(1000, 9000), "weight": rng.randint(1, 99)} for n in item_names]
    data = {section: {k: (rng.randint(1, 9000) if k in ("port", "timeout", "retries") else rng.choice(CITIES))
                      for k in keys}, "version": rng.randint(1, 9), group: items,
            "limits": {section: {"max": rng.randint(10, 500), "min": rng.randint(1, 9)}}}
    variant = rng.choice(["nested", "deeper", "by-name", "count", "sum"])
    load = f"d = json.load(open('/app/{name}'))"
    if variant == "nested":
        key = rng.choice(keys)
        ask, expected, expr = f"the value of \"{key}\" inside the \"{section}\" object", data[section][key], \
            f"d['{section}']['{key}']"
    elif variant == "deeper":
        key = rng.choice(["max", "min"])
        ask = f"the value of \"{key}\" inside the \"{section}\" object inside the \"limits\" object"
        expected, expr = data["limits"][section][key], f"d['limits']['{section}']['{key}']"
    elif variant == "by-name":
        item, field_name = rng.choice(items), rng.choice(["port", "weight"])
        ask = f"the \"{field_name}\" of the entry named \"{item['name']}\" in the \"{group}\" list"
        expected, expr = item[field_name], f"next(x['{field_name}'] for x in d['{group}'] if x['name'] == " \
                                           f"'{item['name']}')"
    elif variant == "count":
        ask, expected, expr = f"how many entries the \"{group}\" list has", len(items), f"len(d['{group}'])"
    else:
        ask, expected, expr = f"the sum of the \"weight\" of all entries in the \"{group}\" list", \
            sum(x["weight"] for x in items), f"sum(x['weight'] for x in d['{group}'])"
    return Instance(
        instruction=f"/app/{name} is a JSON file. Write {ask} to /app/{out}, just the value.",
        files={name: json.dumps(data, indent=2) + "\n"},
        solution=f"python3 -c \"import json; {load}; print({expr})\" > /app/{out}",
        tests={"test_value": _answer_test(out, str(expected))}, variant=variant)


def delete_by_extension(rng: random.Random) -> Instance:
    root, exts = rng.choice(DIRS), _pick(rng, EXTS, 3)
    ext, word = exts[0], rng.choice(WORDS)
    files = _tree(rng, root, exts, rng.randint(8, 16))
    files.setdefault(f"{root}/{rng.choice(WORDS)}_junk.{ext}", "junk\n")
    files.setdefault(f"{root}/old/{word}_{rng.randint(1, 99)}.{exts[1]}", "old\n")
    variant = rng.choice(["recursive", "top-level", "empty", "name-contains"])
    rel = {p: p[len(root) + 1:] for p in files}
    if variant == "recursive":
        ask, gone = f"every file ending in .{ext} under /app/{root}, in subfolders too", \
            {p for p in files if p.endswith("." + ext)}
        solution = f"find /app/{root} -type f -name '*.{ext}' -delete"
    elif variant == "top-level":
        ask = f"every file ending in .{ext} directly in /app/{root} (files in its subfolders stay)"
        gone = {p for p in files if p.endswith("." + ext) and "/" not in rel[p]}
        solution = f"find /app/{root} -maxdepth 1 -type f -name '*.{ext}' -delete"
    elif variant == "empty":
        for p in rng.sample(sorted(files), 3):
            files[p] = ""
        ask, gone = f"every empty file (size 0) under /app/{root}, in subfolders too", \
            {p for p, text in files.items() if not text}
        solution = f"find /app/{root} -type f -empty -delete"
    else:
        ask = f"every file whose name contains \"{word}\" under /app/{root}, in subfolders too"
        gone = {p for p in files if word in p.rsplit("/", 1)[1]}
        solution = f"find /app/{root} -type f -name '*{word}*' -delete"
    keep = sorted(rel[p] for p in files if p not in gone)
    return Instance(instruction=f"Delete {ask}. Keep all other files.", files=files, solution=solution,
                    tests={"test_kept": f"assert files_under('/app/{root}') == {keep!r}"}, variant=variant)


def make_archive(rng: random.Random) -> Instance:
    root, stem = rng.choice(DIRS), rng.choice(["backup", "bundle", "snapshot"])
    exts = _pick(rng, EXTS, 3)
    files = _tree(rng, root, exts, rng.randint(4, 9))
    files.setdefault(f"{root}/{rng.choice(WORDS)}_main.{exts[0]}", "main\n")
    variant = rng.choice(["folder", "only-ext", "plain-tar", "contents"])
    name, mode, expected = f"{stem}.tar.gz", "r:gz", sorted(files)
    what = f"of the folder /app/{root}. Paths inside the archive must start with \"{root}/\""
    solution = f"tar -czf /app/{name} -C /app {root}"
    if variant == "only-ext":
        expected = sorted(p for p in files if p.endswith("." + exts[0]))
        what = (f"of only the .{exts[0]} files under /app/{root} (subfolders too). Paths inside the archive must start "
                f"with \"{root}/\"")
        solution = f"cd /app && find {root} -type f -name '*.{exts[0]}' | tar -czf /app/{name} -T -"
    elif variant == "plain-tar":
        name, mode = f"{stem}.tar", "r:"
        what = f"of the folder /app/{root}, not compressed. Paths inside the archive must start with \"{root}/\""
        solution = f"tar -cf /app/{name} -C /app {root}"
    elif variant == "contents":
        expected = sorted(p[len(root) + 1:] for p in files)
        what = (f"of what is inside /app/{root}: paths inside the archive are relative to /app/{root} (e.g. "
                f"\"{expected[0]}\", no \"{root}/\" in front)")
        solution = f"cd /app/{root} && tar -czf /app/{name} *"
    kind = "an uncompressed tar archive" if variant == "plain-tar" else "a gzip-compressed tar archive"
    return Instance(
        instruction=f"Create {kind} /app/{name} {what}.", files=files, solution=solution,
        tests={"test_archive": (f"with tarfile.open({'/app/' + name!r}, {mode!r}) as t:\n"
                                f"    got = sorted(m.name.removeprefix('./') for m in t.getmembers() if m.isfile())\n"
                                f"assert got == {expected!r}, got")}, variant=variant)


def first_lines(rng: random.Random) -> Instance:
    name, n, out = f"{rng.choice(['words', 'names', 'items'])}.txt", rng.randint(3, 9), \
        rng.choice(["head.txt", "top.txt", "part.txt"])
    word = rng.choice(WORDS[:8])
    lines = [f"{rng.choice(WORDS[:8] if i % 2 else WORDS)} {rng.randint(1, 999)}" for i in range(rng.randint(20, 34))]
    variant = rng.choice(["first", "range", "skip", "first-matching"])
    if variant == "first":
        ask, expected, solution = f"the first {n} lines", lines[:n], f"head -n {n} /app/{name}"
    elif variant == "range":
        a = rng.randint(2, 8)
        b = a + rng.randint(2, 8)
        ask, expected, solution = f"lines {a} to {b} (both included, the first line is line 1)", lines[a - 1:b], \
            f"sed -n '{a},{b}p' /app/{name}"
    elif variant == "skip":
        ask, expected, solution = f"every line except the first {n}", lines[n:], f"tail -n +{n + 1} /app/{name}"
    else:
        matching = [line for line in lines if line.split()[0] == word]
        while len(matching) < n:
            lines.append(f"{word} {rng.randint(1, 999)}")
            matching.append(lines[-1])
        ask, expected = f"the first {n} lines that start with the word \"{word}\"", matching[:n]
        solution = f"grep '^{word} ' /app/{name} | head -n {n}"
    return Instance(instruction=f"Write {ask} of /app/{name} to /app/{out}.",
                    files={name: "".join(line + "\n" for line in lines)}, solution=f"{solution} > /app/{out}",
                    tests={"test_lines": _lines_test(out, expected)}, variant=variant)


def rename_extension(rng: random.Random) -> Instance:
    root = rng.choice(DIRS)
    old, new = _pick(rng, ["txt", "md", "text", "log", "dat", "csv"], 2)
    names = sorted({f"{w}.{old}" for w in rng.sample(WORDS, rng.randint(3, 7))})
    other = f"{rng.choice(WORDS)}_keep.cfg"
    variant = rng.choice(["extension", "prefix", "into-folder", "recursive"])
    files = {f"{root}/{n}": f"{n}\n" for n in names} | {f"{root}/{other}": "keep\n"}
    if variant == "recursive":
        deep = f"{rng.choice(['old', '2024', 'misc'])}/{rng.choice(WORDS)}_deep.{old}"
        files[f"{root}/{deep}"] = "deep\n"
        names.append(deep)
    if variant in ("extension", "recursive"):
        expected = [n[: -len(old)] + new for n in names]
        where = f"/app/{root} and its subfolders" if variant == "recursive" else f"/app/{root}"
        ask = f"In {where}, rename every file ending in .{old} so that it ends in .{new} instead " \
              f"(report.{old} becomes report.{new})."
        solution = (f"find /app/{root} -type f -name '*.{old}' -exec sh -c 'mv \"$1\" \"${{1%.{old}}}.{new}\"' _ {{}} \\;"
                    if variant == "recursive" else
                    f"cd /app/{root} && for f in *.{old}; do mv \"$f\" \"${{f%.{old}}}.{new}\"; done")
    elif variant == "prefix":
        prefix = rng.choice(["old_", "draft_", "2024_"])
        expected = [prefix + n for n in names]
        ask = f"In /app/{root}, rename every file ending in .{old} by putting \"{prefix}\" in front of its name " \
              f"(report.{old} becomes {prefix}report.{old})."
        solution = f"cd /app/{root} && for f in *.{old}; do mv \"$f\" \"{prefix}$f\"; done"
    else:
        sub = rng.choice(["done", "moved", "sorted"])
        expected = [f"{sub}/{n}" for n in names]
        ask = f"Move every file ending in .{old} in /app/{root} into a new folder /app/{root}/{sub}."
        solution = f"mkdir -p /app/{root}/{sub} && mv /app/{root}/*.{old} /app/{root}/{sub}/"
    return Instance(instruction=f"{ask} Leave other files alone.", files=files, solution=solution,
                    tests={"test_names": f"assert files_under('/app/{root}') == {sorted(expected + [other])!r}"},
                    variant=variant)


def count_files(rng: random.Random) -> Instance:
    root, out = rng.choice(DIRS), rng.choice(["count.txt", "answer.txt", "n.txt"])
    exts = _pick(rng, EXTS, 3)
    files = _tree(rng, root, exts, rng.randint(5, 20))
    variant = rng.choice(["files", "by-extension", "folders", "larger-than", "top-level"])
    rel = [p[len(root) + 1:] for p in files]
    if variant == "files":
        ask, expected = "files are there in {d}, counting its subfolders too (folders themselves do not count)", \
            len(files)
        solution = f"find /app/{root} -type f | wc -l"
    elif variant == "by-extension":
        ask = f"files ending in .{exts[0]} are there in {{d}}, counting its subfolders too"
        expected = sum(p.endswith("." + exts[0]) for p in files)
        solution = f"find /app/{root} -type f -name '*.{exts[0]}' | wc -l"
    elif variant == "folders":
        ask = "folders are there inside {d}, at any depth ({d} itself does not count)"
        expected = len({"/".join(r.split("/")[:i]) for r in rel for i in range(1, r.count("/") + 1)})
        solution = f"find /app/{root} -mindepth 1 -type d | wc -l"
    elif variant == "larger-than":
        files = {p: "x" * rng.randint(10, 3000) + "\n" for p in files}
        limit = rng.choice([500, 1000, 2000])
        ask = f"files larger than {limit} bytes are there in {{d}}, counting its subfolders too"
        expected = sum(len(t) > limit for t in files.values())
        solution = f"find /app/{root} -type f -size +{limit}c | wc -l"
    else:
        ask, expected = "files are directly in {d} (files in its subfolders do not count)", \
            sum("/" not in r for r in rel)
        solution = f"find /app/{root} -maxdepth 1 -type f | wc -l"
    return Instance(instruction=f"How many {ask.format(d='/app/' + root)}? Write just the number to /app/{out}.",
                    files=files, solution=f"{solution} > /app/{out}",
                    tests={"test_count": _answer_test(out, str(expected))}, variant=variant)


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
            "variant": instance.variant, "seed": seed}
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
                         "data_source": "terminal_bench", "family": family.name, "variant": instance.variant}}

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
