"""Check GUI tasks on real desktops: each must be solvable and not solved already.

    python -m slime.agentic.gui.check                       # every shipped task (gui-rl/tasks)
    python -m slime.agentic.gui.check notes/append-line --tasks-dir DIR --json out.json
    python -m slime.agentic.gui.check --tasks-dir OSWORLD/evaluation_examples --set test_all.json --cache DIR \
        [--solutions-dir gui-rl/osworld_solutions] [--runnable] [--terminal-shortcut]   # OSWorld's own tasks

For every task, each run on a fresh desktop through the `gui` provider (the same calls a policy makes):

* the scripted solution (``<id>.solution.json`` beside the task, or ``<solutions-dir>/<domain>/<id>.solution.json``)
  scores 1; a task without one (most of OSWorld's) is checked without it: setup and evaluator run, and
* doing nothing (no action; evaluated as an episode cut off) on a fresh reset scores 0 (so the reset restored the
  state the solution changed, and the task is not solved before the agent acts).

With ``--set`` the tasks are a set file's (OSWorld's layout, :func:`.osworld_report.task_files`); ``--runnable``
checks only those :mod:`.osworld_report` finds runnable here (apps, network, files in ``--cache``) and lists the others
as skipped with their reason. One line per task, then a summary with the measured time; exit status 0 when every
checked task checks out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from slime.agentic.env_service.providers import LeaseContext

from .provider import GuiProvider
from .file_cache import FileCache
from .osworld_report import assess, examples_dir, task_files
from .scripted import load_solution, resolve, solution_path
from .tasks import TASKS_DIR, GuiTask, load_tasks


@dataclass
class TaskCheck:
    task: GuiTask
    solved: float | None = None
    idle: float | None = None
    error: str = ""
    seconds: float = 0.0
    steps: int = 0
    has_solution: bool = True

    @property
    def ok(self) -> bool:
        return not self.error and self.idle == 0.0 and (self.solved == 1.0 or not self.has_solution)

    def line(self) -> str:
        if self.error:
            return f"FAIL {self.task.key:40s} {self.error.splitlines()[0][:300]}"
        solution = f"solution {self.solved} ({self.steps} steps)" if self.has_solution else "no solution"
        return (f"{'ok  ' if self.ok else 'FAIL'} {self.task.key:40s} {solution}  nothing {self.idle}  "
                f"{self.seconds:.1f}s")


async def run_episode(provider: GuiProvider, task: GuiTask, workdir: str, steps: list[dict] | None) -> tuple[dict, int]:
    """Reset `task` on a fresh desktop, play `steps` (None: no action), evaluate; (the evaluation, steps played)."""
    lease = LeaseContext(lease_id="check", task_key=task.key, workdir=workdir)
    env, observation = await provider.reset(lease, {"task_meta": {"task": task.key}})
    played = 0
    try:
        for step in steps or []:
            reply = await provider.exec_tool(env, {"name": "computer_use",
                                                   "arguments": resolve(step, observation.get("text_view", ""))})
            played += 1
            if reply.get("error"):
                raise RuntimeError(f"step {played} ({step}) failed: {reply['observation']}")
            if reply.get("done"):
                break
            observation = reply
        return await provider.evaluate(env, {}), played
    finally:
        await provider.close(env)


async def check_task(provider: GuiProvider, task: GuiTask, workdir: str,
                     solutions_dir: Path | None = None) -> TaskCheck:
    path = solutions_dir / task.domain / f"{task.id}.solution.json" if solutions_dir else solution_path(task)
    check = TaskCheck(task, has_solution=path.is_file())
    start = time.monotonic()
    try:
        if check.has_solution:
            solved, check.steps = await run_episode(provider, task, workdir, load_solution(task, path))
            check.solved = solved["acc"]
        idle, _ = await run_episode(provider, task, workdir, None)
        check.idle = idle["acc"]
    except Exception as e:  # reported per task; the others go on
        check.error = f"{type(e).__name__}: {e}"
    check.seconds = time.monotonic() - start
    return check


async def check_tasks(tasks: list[GuiTask], workdir: str, concurrency: int = 1, on_done=None,
                      solutions_dir: Path | None = None, **provider_options) -> list[TaskCheck]:
    provider = GuiProvider(**provider_options)
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(task: GuiTask) -> TaskCheck:
        async with sem:
            result = await check_task(provider, task, workdir, solutions_dir)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def select(args) -> tuple[Path, list[GuiTask], list[str]]:
    """(the provider's tasks dir, the tasks to check, lines for the tasks skipped with their reason)."""
    if not args.set_file:
        tasks = [t for t in load_tasks(args.tasks_dir) if not args.keys or t.key in args.keys]
        return args.tasks_dir, tasks, []
    cache = FileCache(args.cache) if args.cache else None
    tasks, skipped, installed = [], [], {}
    for domain, path in task_files(args.tasks_dir, args.set_file):
        if args.keys and f"{domain}/{path.stem}" not in args.keys:
            continue
        report = assess(domain, path, cache, installed)
        if not report.loaded or (args.runnable and report.reasons):
            skipped.append(f"skip {domain}/{path.stem:40s} {'; '.join(report.reasons)[:300]}")
        else:
            tasks.append(report.task)
    return examples_dir(args.tasks_dir), tasks, skipped


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="*", help="tasks as domain/id (default: all)")
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--set", dest="set_file", help="a set file naming the tasks (OSWorld's test_all.json, ...)")
    parser.add_argument("--runnable", action="store_true",
                        help="with --set: check only the tasks osworld_report finds runnable here")
    parser.add_argument("--cache", type=Path, help="the file cache OSWorld's downloads come from (OSWorld's layout)")
    parser.add_argument("--solutions-dir", type=Path, help="scripted solutions as <domain>/<id>.solution.json")
    parser.add_argument("--client-password", default=None, help="OSWorld's {CLIENT_PASSWORD} (default: password)")
    parser.add_argument("--terminal-shortcut", action="store_true",
                        help="Ctrl+Alt+T opens a terminal on the desktops, as on OSWorld's image (its tasks use one)")
    parser.add_argument("--apps-dir", type=Path, default=None, help="the apps the desktops mount (default gui-rl/apps)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the per-task results here")
    args = parser.parse_args(argv)
    try:
        tasks_dir, tasks, skipped = select(args)
    except (OSError, ValueError) as e:
        print(f"check: {e}", file=sys.stderr)
        return 2
    for line in skipped:
        print(line, flush=True)
    options = {"apps_dir": str(args.apps_dir)} if args.apps_dir else {}
    if args.cache:
        options["file_cache"] = str(args.cache)
    if args.client_password is not None:
        options["client_password"] = args.client_password
    if args.terminal_shortcut:
        options["terminal_shortcut"] = True
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slime-gui-check-") as workdir:
        results = asyncio.run(check_tasks(tasks, workdir, args.concurrency, tasks_dir=tasks_dir, **options,
                                          solutions_dir=args.solutions_dir,
                                          on_done=lambda c: print(c.line(), flush=True)))
    total = time.monotonic() - start
    good = sum(c.ok for c in results)
    solved = sum(c.has_solution and c.solved == 1.0 for c in results)
    print(f"{good}/{len(results)} tasks check out in {total:.0f} s ({total / max(1, len(results)):.1f} s per task): "
          f"{sum(c.idle == 0.0 for c in results)} score 0 idle, {solved} of {sum(c.has_solution for c in results)} "
          f"scripted solutions score 1" + (f"; {len(skipped)} skipped" if skipped else ""))
    if args.json:
        args.json.write_text(json.dumps([{"task": c.task.key, "ok": c.ok, "solution": c.solved, "nothing": c.idle,
                                          "has_solution": c.has_solution, "error": c.error,
                                          "seconds": round(c.seconds, 2)} for c in results]
                                        + [{"skipped": line} for line in skipped], indent=1) + "\n")
    return 0 if results and good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
