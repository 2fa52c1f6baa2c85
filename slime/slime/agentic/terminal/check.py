"""Check tasks: for each, a fresh workspace + solution.sh must pass every test (reward 1), and a fresh workspace
where nothing was done must not (reward < 1; a task where doing nothing passes any test is warned about by name:
it would pay an agent for nothing under upstream's pass-rate reward). Reports the measured setup, solution and test
times.

    python -m slime.agentic.terminal.check                      # every task in terminal-rl/tasks
    python -m slime.agentic.terminal.check --tasks-dir DIR 'git-*' count-error-lines --concurrency 2 --json out.json
    python -m slime.agentic.terminal.check --backend docker     # in containers (scripts/setup_docker.sh first)
    python -m slime.agentic.terminal.check --backend docker --build --tasks-dir DIR   # each task's own image

Exit status 0 when every task checks out, 1 otherwise, 2 when no task loads (an empty folder, a malformed task, a
name that matches nothing: the reason is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from slime.agentic.docker_sandbox import DEFAULT_IMAGE, task_image

from .task_images import build_task_image
from .tasks import DEFAULT_TASKS_DIR, TaskFormatError, TerminalTask, load_tasks
from .workspace import EvalOutcome, evaluate_solution, keeps_agent_processes


@dataclass
class TaskCheck:
    task: TerminalTask
    solved: EvalOutcome | None = None
    unsolved: EvalOutcome | None = None
    solved_times: dict | None = None
    unsolved_times: dict | None = None
    error: str = ""  # setup.sh or solution.sh failed

    @property
    def ok(self) -> bool:
        return (not self.error and self.solved is not None and self.solved.success
                and self.unsolved is not None and self.unsolved.reward < 1.0)

    @property
    def warning(self) -> str:
        """Doing nothing must score the minimum under both reward semantics: no test may pass on a fresh workspace
        (a test that passes untouched pays an agent for nothing under upstream's pass-rate reward)."""
        u = self.unsolved
        if u is not None and u.passed > 0:
            return f"doing nothing passes {u.passed}/{u.total} tests (reward {u.reward:+.2f}, above the minimum -1)"
        return ""

    def line(self) -> str:
        t = self.task
        if self.error:
            return f"FAIL {t.name:30s} {self.error.splitlines()[0]}"
        s, u, st = self.solved, self.unsolved, self.solved_times
        return (f"{'ok  ' if self.ok else 'FAIL'} {t.name:30s} {t.category or '-':17s} solution {s.passed}/{s.total} "
                f"(reward {s.reward:+.2f})  nothing {u.passed}/{u.total} (reward {u.reward:+.2f})  "
                f"setup {st['setup_s']:.2f}s  solution {st['solution_s']:.2f}s  tests {st['tests_s']:.2f}s"
                + (f"  WARNING {self.warning}" if self.warning else ""))

    def as_dict(self) -> dict:
        return {
            "task": self.task.name, "category": self.task.category, "ok": self.ok, "error": self.error,
            "format": self.task.format, "warning": self.warning,
            "solved": self.solved.as_dict() if self.solved else None,
            "unsolved": self.unsolved.as_dict() if self.unsolved else None,
            "solved_times": self.solved_times, "unsolved_times": self.unsolved_times,
        }


async def check_tasks(tasks: list[TerminalTask], concurrency: int = 2, **workspace_kwargs) -> list[TaskCheck]:
    """Both runs of every task, `concurrency` workspaces at a time; results in the order of `tasks`. With
    ``docker={"image": "tb__{task}", ...}`` each task's workspace runs in a container of its own image (``{task}``:
    the task's name), all of them in the same pool of `concurrency` slots; with ``docker={"build": True, ...}`` a task
    that has a Dockerfile runs in the image built from it (`task_images.build_task_image`, once per content)."""
    sem = asyncio.Semaphore(max(1, concurrency))
    checks = [TaskCheck(t) for t in tasks]
    docker = workspace_kwargs.pop("docker", None)

    images: dict[str, asyncio.Task] = {}

    async def kwargs_for(task: TerminalTask) -> dict:
        if docker is None:
            return workspace_kwargs
        options = {k: v for k, v in docker.items() if k != "build"}
        if docker.get("build") and task.dockerfile is not None:  # the task's own image, built once for both runs
            if task.name not in images:
                images[task.name] = asyncio.ensure_future(asyncio.to_thread(
                    build_task_image, task, docker_host=docker.get("docker_host")))
            built = await images[task.name]
            # as Terminal-Bench runs a task: as the image's root, in the Dockerfile's WORKDIR, with the pytest plugins
            # its author installed (a verifier's `pytest --ctrf` needs pytest-json-ctrf loaded), and what a root
            # solution started still running during the tests (a server task)
            user = options.get("user", "root")
            return {"autoload_pytest_plugins": True, "keep_agent_processes": keeps_agent_processes(user),
                    **workspace_kwargs, "services": built.services,
                    "docker": {**options, "image": built.tag, "workdir": built.workdir, "user": user}}
        image = task_image(docker.get("image", DEFAULT_IMAGE), task.name)
        return {**workspace_kwargs, "docker": {**options, "image": image}}

    async def run(check: TaskCheck, solve: bool) -> None:
        async with sem:
            try:
                outcome, times = await evaluate_solution(check.task, solve=solve, **(await kwargs_for(check.task)))
            except Exception as e:  # a broken setup.sh or solution.sh: reported, the others go on
                check.error = check.error or f"{type(e).__name__}: {e}"
                return
        if solve:
            check.solved, check.solved_times = outcome, times
        else:
            check.unsolved, check.unsolved_times = outcome, times

    await asyncio.gather(*(run(c, solve) for c in checks for solve in (True, False)))
    return checks


def summary(checks: list[TaskCheck], wall_s: float) -> str:
    timed = [c for c in checks if c.solved_times and c.unsolved_times]

    def stats(key: str) -> str:
        values = [c.solved_times[key] for c in timed] + ([c.unsolved_times[key] for c in timed] if key != "solution_s" else [])
        return f"median {statistics.median(values):.2f}s, max {max(values):.2f}s" if values else "-"

    ok = sum(c.ok for c in checks)
    warned = [c.task.name for c in checks if c.warning]
    return (f"{ok}/{len(checks)} tasks ok" + (f" ({len(warned)} warned: {', '.join(warned)})" if warned else "")
            + f"; {2 * len(checks)} fresh workspaces in {wall_s:.1f}s wall; "
            f"setup {stats('setup_s')}; solution {stats('solution_s')}; tests {stats('tests_s')}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("names", nargs="*", help="task names or glob patterns (default: all)")
    p.add_argument("--tasks-dir", default=os.environ.get("TERMINAL_TASKS_DIR", str(DEFAULT_TASKS_DIR)))
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--json", help="write the per-task results and timings here")
    p.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap", help="where the tasks run")
    p.add_argument("--image", default=DEFAULT_IMAGE, help="--backend docker: the image ({task}: the task's name)")
    p.add_argument("--build", action="store_true",
                   help="--backend docker: build each task's image from its own Dockerfile (the local Debian image "
                        "standing in for the common base images); --image for tasks without one")
    args = p.parse_args(argv)
    try:
        tasks = load_tasks(args.tasks_dir, args.names or None)
    except TaskFormatError as exc:
        print(f"check: {exc}", file=sys.stderr)
        return 2
    start = time.monotonic()
    if args.build and args.backend != "docker":
        print("check: --build builds Docker images: it needs --backend docker", file=sys.stderr)
        return 2
    docker = {"docker": {"image": args.image, "build": args.build}} if args.backend == "docker" else {}
    checks = asyncio.run(check_tasks(tasks, args.concurrency, **docker))
    wall = time.monotonic() - start
    for c in checks:
        print(c.line(), flush=True)
    print(summary(checks, wall))
    if args.json:
        Path(args.json).write_text(json.dumps({"wall_s": wall, "tasks": [c.as_dict() for c in checks]}, indent=2))
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
