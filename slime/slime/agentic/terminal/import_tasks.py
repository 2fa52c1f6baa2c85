"""Import a downloaded Terminal-Bench dataset (1.x or 2.0 / Harbor): validate every task, decide where each can run,
run the reference solutions there, and write a report.

    python -m slime.agentic.terminal.import_tasks SRC DEST [--backend auto|bwrap|docker] [--concurrency 2]
                                                           [--limit N] [NAMES ...]

Every task folder below SRC is loaded (a malformed one is reported with the reason, never skipped silently). A task
runs in the bubblewrap sandbox when it has a setup.sh or its Dockerfile can be done there (`dockerfile.py`); else on
the Docker backend, its image built from its own Dockerfile (`task_images.py`), when `--backend` allows Docker and a
daemon answers (scripts/setup_docker.sh). Each runnable task is checked as `check` does (the reference solution must
pass every test, doing nothing must not). DEST gets the tasks that checked out, copied unchanged (train on them with
`--terminal-tasks-dir DEST`), and `import_report.json` + `IMPORT_REPORT.md`: per task its format, backend, reference
score, score of doing nothing, time, or why it does not run. Exit status 0 when at least one task imported, 1 when
none did, 2 when SRC holds no task at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .check import TaskCheck, check_tasks
from .dockerfile import NeedsDocker, sandbox_build
from .tasks import TaskFormatError, TerminalTask, find_task_dirs, load_task


@dataclass
class ImportedTask:
    path: Path
    task: TerminalTask | None = None
    backend: str | None = None  # "bwrap" or "docker"
    problem: str = ""  # why it does not run, or why its check failed
    check: TaskCheck | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.check is not None and self.check.ok

    def as_dict(self) -> dict:
        c = self.check
        return {"task": self.path.name, "format": self.task.format if self.task else None, "backend": self.backend,
                "ok": self.ok, "problem": self.problem, "warning": c.warning if c else "",
                "reference": c.solved.as_dict() if c and c.solved else None,
                "nothing": c.unsolved.as_dict() if c and c.unsolved else None,
                "times": c.solved_times if c else None, "notes": self.notes}


def choose_backend(task: TerminalTask, allowed: str) -> tuple[str | None, str]:
    """(backend, reason it is not the sandbox) for `task` under `--backend allowed`; backend None: cannot run."""
    if not task.has_solution:
        return None, "no reference solution (solution.sh, solution.yaml or solution/solve.sh)"
    if task.setup_script is not None or task.dockerfile is None:
        return ("bwrap" if allowed != "docker" else "docker"), ""
    try:
        sandbox_build(task.dockerfile, task.environment_dir or task.path, task.compose_file)
    except NeedsDocker as exc:
        if allowed == "bwrap":
            return None, str(exc)
        return "docker", str(exc)
    return ("bwrap" if allowed != "docker" else "docker"), ""


def import_tasks(src: Path, dest: Path | None, *, backend: str = "auto", concurrency: int = 2,
                 names: list[str] | None = None, limit: int | None = None, docker_host: str | None = None,
                 base_dir: Path | None = None) -> list[ImportedTask]:
    dirs = find_task_dirs(src)
    if names:
        dirs = [d for d in dirs if d.name in names]
    if limit:
        dirs = dirs[:limit]
    if not dirs:
        raise TaskFormatError(f"no task folder in {src}" + (f" named {', '.join(names)}" if names else ""))
    items = []
    for d in dirs:
        item = ImportedTask(d)
        try:
            item.task = load_task(d)
        except TaskFormatError as exc:
            item.problem = f"does not load: {exc}"
        items.append(item)
        if item.task is None:
            continue
        item.backend, reason = choose_backend(item.task, backend)
        if item.backend is None:
            item.problem = reason
        elif reason:
            item.notes.append(f"sandbox: {reason}")
    for kind in ("bwrap", "docker"):
        batch = [i for i in items if i.backend == kind]
        if not batch:
            continue
        options = {} if kind == "bwrap" else {"docker": {"build": True, "docker_host": docker_host}}
        if base_dir is not None:
            options["base_dir"] = base_dir
        checks = asyncio.run(check_tasks([i.task for i in batch], concurrency, **options))
        for item, check in zip(batch, checks):
            item.check = check
            if not check.ok:
                item.problem = check.error.splitlines()[0] if check.error else check.line()
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        for item in items:
            if item.ok:
                shutil.copytree(item.path, dest / item.path.name, dirs_exist_ok=False)
    return items


def report_markdown(items: list[ImportedTask], src: Path, wall_s: float) -> str:
    ok = [i for i in items if i.ok]
    ran = [i for i in items if i.check is not None]
    by_backend = Counter(i.backend for i in ok)
    reasons = Counter(_reason_kind(i.problem) for i in items if not i.ok)
    lines = [f"# Import of {src}", "",
             f"{len(items)} task folders; {sum(i.task is not None for i in items)} load; {len(ran)} ran their "
             f"reference solution; {len(ok)} checked out (reference passes every test, doing nothing does not): "
             + ", ".join(f"{n} on {b}" for b, n in sorted(by_backend.items())) + f". Wall time {wall_s:.0f} s.", "",
             "| task | format | backend | reference | nothing | seconds | problem |", "|---|---|---|---|---|---|---|"]
    for i in items:
        c = i.check
        ref = f"{c.solved.passed}/{c.solved.total}" if c and c.solved else "-"
        nothing = f"{c.unsolved.passed}/{c.unsolved.total}" if c and c.unsolved else "-"
        secs = f"{sum(c.solved_times.values()):.1f}" if c and c.solved_times else "-"
        fmt = i.task.format if i.task else "-"
        lines.append(f"| {i.path.name} | {fmt} | {i.backend or '-'} | {ref} | {nothing} | {secs} | "
                     f"{(i.problem or (c.warning if c else '')).replace('|', '/')[:160]} |")
    if reasons:
        lines += ["", "Why the others do not run:", ""]
        lines += [f"- {n} x {reason}" for reason, n in reasons.most_common()]
    return "\n".join(lines) + "\n"


def _reason_kind(problem: str) -> str:
    """A problem message without its task-specific details, for counting."""
    text = re.sub(r"task '[^']*'(: )?", "", problem.split("\n")[0])  # the same reason for every task counts once
    for marker in ("needs the Docker backend: ", "does not load: "):
        if marker in text:
            rest = text.partition(marker)[2]
            return marker + rest.split(": ", 1)[-1].split(" (")[0][:80]
    return text[:100]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("src", type=Path)
    p.add_argument("dest", type=Path, nargs="?", help="where the tasks that checked out are copied (and the report)")
    p.add_argument("names", nargs="*", help="only these task folders")
    p.add_argument("--backend", choices=["auto", "bwrap", "docker"], default="auto")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--limit", type=int, default=None, help="the first N task folders (path order)")
    p.add_argument("--report", type=Path, default=None, help="where the report goes (default: DEST, else SRC's name)")
    args = p.parse_args(argv)
    start = time.monotonic()
    try:
        items = import_tasks(args.src, args.dest, backend=args.backend, concurrency=args.concurrency,
                             names=args.names or None, limit=args.limit)
    except TaskFormatError as exc:
        print(f"import_tasks: {exc}", file=sys.stderr)
        return 2
    wall = time.monotonic() - start
    out = args.report or args.dest or Path(f"import-{args.src.resolve().name}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "import_report.json").write_text(json.dumps({"src": str(args.src), "wall_s": wall,
                                                        "tasks": [i.as_dict() for i in items]}, indent=2))
    markdown = report_markdown(items, args.src, wall)
    (out / "IMPORT_REPORT.md").write_text(markdown)
    print(markdown)
    return 0 if any(i.ok for i in items) else 1


if __name__ == "__main__":
    sys.exit(main())
