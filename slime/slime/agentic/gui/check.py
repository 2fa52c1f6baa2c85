"""Check GUI tasks on real desktops: each must be solvable and not solved already.

    python -m slime.agentic.gui.check                       # every shipped task (gui-rl/tasks)
    python -m slime.agentic.gui.check notes/append-line --tasks-dir DIR --json out.json

For every task, each run on a fresh desktop through the `gui` provider (the same calls a policy makes):

* the scripted solution (``<id>.solution.json``) scores 1;
* then doing nothing (no action; evaluated as an episode cut off) on a fresh reset scores 0 (so the reset restored
  the state the solution changed).

One line per task, then a summary with the measured time; exit status 0 when every task checks out.
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
from .scripted import load_solution, resolve
from .tasks import TASKS_DIR, GuiTask, load_tasks


@dataclass
class TaskCheck:
    task: GuiTask
    solved: float | None = None
    idle: float | None = None
    error: str = ""
    seconds: float = 0.0
    steps: int = 0

    @property
    def ok(self) -> bool:
        return not self.error and self.solved == 1.0 and self.idle == 0.0

    def line(self) -> str:
        if self.error:
            return f"FAIL {self.task.key:40s} {self.error.splitlines()[0][:300]}"
        return (f"{'ok  ' if self.ok else 'FAIL'} {self.task.key:40s} solution {self.solved} ({self.steps} steps)  "
                f"nothing {self.idle}  {self.seconds:.1f}s")


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


async def check_task(provider: GuiProvider, task: GuiTask, workdir: str) -> TaskCheck:
    check = TaskCheck(task)
    start = time.monotonic()
    try:
        solved, check.steps = await run_episode(provider, task, workdir, load_solution(task))
        check.solved = solved["acc"]
        idle, _ = await run_episode(provider, task, workdir, None)
        check.idle = idle["acc"]
    except Exception as e:  # reported per task; the others go on
        check.error = f"{type(e).__name__}: {e}"
    check.seconds = time.monotonic() - start
    return check


async def check_tasks(tasks: list[GuiTask], workdir: str, concurrency: int = 1, on_done=None,
                      **provider_options) -> list[TaskCheck]:
    provider = GuiProvider(**provider_options)
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(task: GuiTask) -> TaskCheck:
        async with sem:
            result = await check_task(provider, task, workdir)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(t) for t in tasks)))


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("keys", nargs="*", help="tasks as domain/id (default: all)")
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--apps-dir", type=Path, default=None, help="the apps the desktops mount (default gui-rl/apps)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the per-task results here")
    args = parser.parse_args(argv)
    tasks = [t for t in load_tasks(args.tasks_dir) if not args.keys or t.key in args.keys]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="slime-gui-check-") as workdir:
        options = {"apps_dir": str(args.apps_dir)} if args.apps_dir else {}
        results = asyncio.run(check_tasks(tasks, workdir, args.concurrency, tasks_dir=args.tasks_dir, **options,
                                          on_done=lambda c: print(c.line(), flush=True)))
    total = time.monotonic() - start
    good = sum(c.ok for c in results)
    print(f"{good}/{len(results)} tasks check out in {total:.0f} s ({total / max(1, len(results)):.1f} s per task)")
    if args.json:
        args.json.write_text(json.dumps([{"task": c.task.key, "ok": c.ok, "solution": c.solved, "nothing": c.idle,
                                          "error": c.error, "seconds": round(c.seconds, 2)} for c in results],
                                        indent=1) + "\n")
    return 0 if results and good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
