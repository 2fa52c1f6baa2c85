"""Verified SWE demonstrations for a warm start: each training instance fixed by a scripted engineer through the real
execution service and the agent loop, kept only when the sealed evaluation resolved it, written as SFT rows in the
loop's own layout.

    python swe-rl/swe_demonstrations.py --data TRAIN.jsonl --out sft_demos.jsonl [--instances FILE]

The scripted engineer works as the instance prompt's workflow asks, from what the gold patch and the base tree say
(the agent never sees either; the demonstration is what a competent engineer would type):

1. find the function the bug is in: `grep -rn "def <name>(" --include="*.py" <top folder>`;
2. read it: `sed -n 'a,bp' <file>` (from its `def` line, or a few lines above the change for a long function, to a
   few lines past the change);
3. edit it: a short Python script that replaces the smallest unique piece of the file around each change (the
   removed lines, grown by a line above or below until the file holds it once) with the fixed piece;
4. run the test module the issue's behaviour is tested in (its visible tests; the hidden ones come back only at
   evaluation): `python -m pytest -q <file> 2>&1 | tail -n 3`;
5. submit.

Every model turn becomes one row (`slime.rollout.sft_rollout`'s format): `prompt` = the messages the loop rendered
at that turn (system prompt, issue, earlier turns and the real observations), `metadata.segments` = the turn's text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path

import swe_templates as templates
from generate_with_swe_remote import AgentSettings, ScriptedSwePolicy, SweEpisode, bash_response, run_episode

from slime.agentic.swe.instances import SweInstance, load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
READ_LINES = 30  # at most this many lines shown by the reading step


@dataclass
class Hunk:
    path: str
    old_start: int  # 1-based line of the hunk's first old line
    old: list[str]  # the hunk's old lines (context and removed), without the newline
    new: list[str]  # its new lines (context and added)
    before: int  # context lines before the first change
    after: int  # context lines after the last change


def parse_hunks(patch: str) -> list[Hunk]:
    """The hunks of a unified git diff of modified files."""
    raw: list[tuple[str, int, list[tuple[str, str]]]] = []
    path = None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            path = None
        elif line.startswith("+++ b/"):
            path = line[6:]
        elif (m := HUNK.match(line)) and path:
            raw.append((path, int(m.group(1)), []))
        elif raw and path and line[:1] in (" ", "-", "+"):
            raw[-1][2].append((line[0], line[1:]))
    hunks = []
    for path, start, body in raw:
        changes = [i for i, (tag, _) in enumerate(body) if tag != " "]
        if changes:
            hunks.append(Hunk(path, start, [t for tag, t in body if tag in " -"], [t for tag, t in body if tag in " +"],
                              changes[0], len(body) - 1 - changes[-1]))
    return hunks


def unique_piece(source: str, hunk: Hunk) -> tuple[str, str]:
    """(old, new) texts: the hunk's changed lines, grown by context lines until `source` holds the old text once
    (an insertion starts from the line before it)."""
    lo, hi = hunk.before, len(hunk.old) - hunk.after  # the removed lines, over hunk.old
    if lo == hi:  # a pure insertion: start from the line before it (or after it, at the hunk's top)
        lo, hi = (lo - 1, hi) if lo > 0 else (lo, hi + 1)
    while source.count("\n".join(hunk.old[lo:hi]) + "\n") != 1:
        if lo == 0 and hi == len(hunk.old):
            raise ValueError(f"{hunk.path}: the hunk at line {hunk.old_start} is not unique in the file")
        if lo > 0 and ((hi - lo) % 2 == 0 or hi == len(hunk.old)):
            lo -= 1
        else:
            hi += 1
    old = "\n".join(hunk.old[lo:hi]) + "\n"
    new_lines = hunk.new[lo:len(hunk.new) - (len(hunk.old) - hi)]
    return old, "\n".join(new_lines) + "\n" if new_lines else ""


def enclosing_function(lines: list[str], line_no: int) -> tuple[str, int]:
    """(name, 1-based line) of the nearest `def` at or above `line_no` whose indentation is less than the line's."""
    target = lines[line_no - 1]
    indent = len(target) - len(target.lstrip())
    for k in range(line_no - 1, -1, -1):
        m = DEF.match(lines[k])
        if m and len(lines[k]) - len(lines[k].lstrip()) < max(indent, 1):
            return m.group(1), k + 1
    raise ValueError(f"line {line_no} is not inside a function")


def issue_function(statement: str, defined: set[str]) -> str | None:
    """The function the issue names: the first name called, or named in backticks, in the statement's code that the
    repository defines."""
    code = " ".join(re.findall(r"```.*?```|`[^`\n]+`", statement, flags=re.S))
    for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(|`(?:[A-Za-z_][A-Za-z0-9_]*\.)*([A-Za-z_][A-Za-z0-9_]*)`", code):
        name = m.group(1) or m.group(2)
        if name in defined:
            return name
    return None


def edit_command(edits: list[tuple[str, str, str]]) -> str:
    """A Python script (a here-document) that replaces each (path, old, new) once, and fails loudly otherwise."""
    body = ["from pathlib import Path", ""]
    for path, old, new in edits:
        body += [f"p = Path({path!r})", "s = p.read_text()", f"old = {old!r}", f"new = {new!r}",
                 "assert s.count(old) == 1, 'the code to change is not there exactly once'",
                 "p.write_text(s.replace(old, new))", ""]
    return "python3 - <<'EOF'\n" + "\n".join(body).rstrip() + "\nEOF"


def demonstration_responses(instance: SweInstance, base_file, defined: set[str]) -> list[str]:
    """The scripted engineer's responses for `instance`; `base_file(path)` reads a file of the base tree, `defined`
    holds the names of the functions its non-test Python files define."""
    hunks = parse_hunks(instance.patch)
    if not hunks:
        raise ValueError(f"{instance.instance_id}: the gold patch changes no lines")
    first = hunks[0]
    lines = base_file(first.path).splitlines()
    changed_line = first.old_start + first.before  # the first removed line (or the one an insertion follows)
    name, def_line = enclosing_function(lines, min(changed_line, len(lines)))
    last_line = first.old_start + len(first.old) - first.after - 1
    start = max(def_line, last_line - READ_LINES + 4)
    stop = min(len(lines), last_line + 3)
    top = first.path.split("/")[0] if "/" in first.path else "."
    edits = []
    for h in hunks:
        old, new = unique_piece(base_file(h.path), h)
        edits.append((h.path, old, new))
    test_file = instance.FAIL_TO_PASS[0].split("::")[0]
    named = issue_function(instance.problem_statement, defined)
    find = []
    if named and named != name:  # the issue names the function the user called; the bug is in one it calls
        find.append(bash_response(f'grep -rn "def {named}(" --include="*.py" {top}',
                                  f"The issue is about what `{named}` does. I look for where it is defined."))
        find.append(bash_response(f'grep -rn "def {name}(" --include="*.py" {top}',
                                  f"`{named}` relies on `{name}`, where the wrong result can come from. I look for where that is defined."))
    else:
        find.append(bash_response(f'grep -rn "def {name}(" --include="*.py" {top}',
                                  f"The issue is about what `{name}` does. I look for where it is defined."))
    return [
        *find,
        bash_response(f"sed -n '{start},{stop}p' {first.path}",
                      f"`{name}` is in {first.path} at line {def_line}. I read the code around it."),
        bash_response(edit_command(edits),
                      "I see the mistake that gives the wrong behaviour in the issue. I fix it in place."),
        bash_response(f"python -m pytest -q {test_file} 2>&1 | tail -n 3",
                      "I run the tests of that module to check that nothing else broke."),
        bash_response(templates.SUBMIT_COMMAND, "The fix is in place and the tests pass: I submit it."),
    ]


def sft_rows(episode: SweEpisode) -> list[dict]:
    """One SFT row per assistant turn: the messages before it as the prompt, its text as the trained segment."""
    rows = []
    for i, message in enumerate(episode.messages):
        if message["role"] == "assistant":
            rows.append({"prompt": episode.messages[:i],
                         "metadata": {"segments": [{"text": message["content"], "loss": 1}],
                                      "instance_id": episode.instance_id,
                                      "turn": sum(m["role"] == "assistant" for m in episode.messages[:i])}})
    return rows


def base_tree(instance: SweInstance):
    """(a reader of the base tree's files, the functions its non-test Python files define), from the repository
    store (no checkout; the names from one `git grep` over the base commit)."""
    from slime.agentic.swe.patches import is_test_path
    from slime.agentic.swe.repos import ensure_base_commit, git, read_file

    repo = ensure_base_commit(instance)
    found = git("grep", "-E", r"^\s*(async\s+)?def\s+[A-Za-z_]", instance.base_commit, "--", "*.py", git_dir=repo,
                check=False).stdout.decode("utf-8", "surrogateescape")
    defined = set()
    for line in found.splitlines():  # "<commit>:<path>:<line>"
        _, path, text = line.split(":", 2)
        if not is_test_path(path) and (m := DEF.match(text)):
            defined.add(m.group(1))
    return (lambda path: read_file(repo, instance.base_commit, path).decode()), defined


async def demonstrate(env, instances: list[SweInstance], concurrency: int = 2,
                      max_steps: int = 8) -> tuple[list[dict], list[str]]:
    """(SFT rows of the instances whose demonstration was resolved, ids of those that were not, with the reason)."""
    slots = asyncio.Semaphore(concurrency)

    async def one(instance: SweInstance):
        try:
            responses = demonstration_responses(instance, *base_tree(instance))
        except ValueError as e:
            return instance, None, str(e)
        async with slots:
            episode = await run_episode(ScriptedSwePolicy(responses), env, instance.instance_id,
                                        AgentSettings(max_steps=max_steps))
        return instance, episode, "" if episode.resolved else (episode.evaluation or {}).get("reason", "unresolved")

    rows, failed = [], []
    for instance, episode, problem in await asyncio.gather(*(one(i) for i in instances)):
        if episode is not None and episode.resolved:
            rows.extend(sft_rows(episode))
        else:
            failed.append(f"{instance.instance_id} ({problem or 'not resolved'})")
    return rows, failed


def instance_ids(data: Path) -> list[str]:
    """The instance ids of a training-row JSONL (upstream's rows: `metadata.instance.instance_id`)."""
    ids = []
    for line in data.read_text().splitlines():
        if line.strip():
            meta = json.loads(line).get("metadata") or {}
            ids.append((meta.get("instance") or {}).get("instance_id") or meta["instance_id"])
    return ids


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="training rows (python -m slime.agentic.swe.instances)")
    parser.add_argument("--instances", default=str(DEFAULT_INSTANCES), help="the SWE-bench-format JSONL they name")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-steps", type=int, default=8)
    args = parser.parse_args(argv)
    import tempfile

    from slime.agentic.env_service.client import EnvClient
    from slime.agentic.env_service.launch import EnvService
    from slime.agentic.env_service.settings import PoolSettings

    instances = load_instances(args.instances, instance_ids(args.data))
    with tempfile.TemporaryDirectory(prefix="swe-demos-") as state, \
            EnvService(PoolSettings(provider="swe", state_dir=state,
                                    provider_options={"instances": str(Path(args.instances).resolve())})) as service:
        async def go():
            async with EnvClient(service.url, service.api_key) as env:
                return await demonstrate(env, instances, max_steps=args.max_steps)

        rows, failed = asyncio.run(go())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(instances) - len(failed)} of {len(instances)} instances demonstrated and resolved, {len(rows)} SFT "
          f"rows -> {args.out}" + (f"; failed: {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
