"""What sealed grading and whole-sandbox budgets (issue 37) cost per terminal episode, against the same episodes
without them, measured in the same run.

    OMP_NUM_THREADS=1 python bench/sealing_cost.py [--tasks N] [--episodes-per-task 4] [--rounds 2] [--looks 8]

An episode here is what the `terminal` provider does for one lease, without the HTTP around it: a fresh workspace
(sandbox, ``setup.sh``), tmux shell sessions in it, the scripted agent's commands through ``shell_exec`` (a look at
``/app``, ``--looks`` more looks at its files as a model's turns make them, then the task's ``solution.sh``), the
shells closed, the task's tests, the workspace closed. Its wall time is the episode's environment time. What sealing
and the budgets add is mostly fixed per episode (the sandbox's group and disks, the sealed test phase), so the share
falls as episodes grow: ``--looks 0`` is the shortest episode a task can have. Two configurations, each in a child process of its own (as a pool server is),
``--episodes-per-task`` episodes of every task in turn:

* **before**: budgets off (``SLIME_SANDBOX_BUDGETS=off``: no control group, no capped disk or /tmp) and the tests as
  they ran before sealing (``run-tests.sh`` writing JUnit XML into a results folder the host reads back);
* **after**: budgets on and the sealed test phase (``ws.run_tests()``: the report channel, the canaries, the
  verdict; the test ids listed before a task's first episode in the process, as a pool server does).

The configurations alternate for ``--rounds`` rounds (so a noisy stretch of the machine hits both). Reported: the
median episode time of each, per task and overall, and the added cost. Last line:
``RESULT sealing_cost value=<added cost in % of the before median> target=<=10 PASS|FAIL``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "slime"))


async def _unsealed_tests(ws) -> bool:
    """run-tests.sh as before sealing: pytest writes JUnit into a results folder of the sandbox user's."""
    from slime.agentic.terminal.junit import read_junit_xml

    await asyncio.to_thread(ws.tests.stage, {"run-tests.sh": ws.task.run_tests_script}, {".": ws.task.tests_dir})
    results = ws.tests_host / ".results"
    results.mkdir(mode=0o700)
    os.chown(results, ws.sandbox.uid, ws.sandbox.uid)
    env = {"PYTHON": ws.python, "TEST_DIR": "/tests", "JUNIT_XML": "/tests/.results/junit.xml", "HOME": "/tmp",
           "PYTEST_ADDOPTS": "-p no:cacheprovider --junitxml=/tests/.results/junit.xml", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONNOUSERSITE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    await ws.sandbox.run(["bash", "/tests/run-tests.sh"], env=env, cwd="/tests")
    report = await asyncio.to_thread(read_junit_xml, results / "junit.xml")
    await asyncio.to_thread(ws.tests.clear)
    return report.all_passed


async def _episode(task, sealed: bool, looks: int) -> float:
    import base64

    from slime.agentic.shell_sessions import ShellSessions
    from slime.agentic.terminal.workspace import APP_DIR, TaskWorkspace

    start = time.monotonic()
    ws = await TaskWorkspace.create(task) if sealed else await asyncio.to_thread(TaskWorkspace, task)
    try:
        if not sealed:  # setup.sh without the listing of the tests (which sealed grading adds)
            result = await ws._run_staged(task.setup_script, "setup.sh", ws.setup_timeout_s) if task.setup_script else None
            assert result is None or result.ok
        shell = ShellSessions(ws.sandbox, workdir=APP_DIR)
        try:
            await shell.call_tool("shell_exec", {"id": "main", "command": "ls -la /app"})
            for k in range(looks):
                await shell.call_tool("shell_exec", {"id": "main", "command": f"ls -la /app /tmp | head -{20 + k}; "
                                                     "find /app -maxdepth 2 -type f | head -3 | xargs -r wc -l"})
            script = base64.b64encode(task.solution_script.read_bytes()).decode()
            await shell.call_tool("shell_exec", {"id": "main", "block": True, "timeout": 60,
                                                 "command": f"echo {script} | base64 -d > /tmp/s.sh && bash /tmp/s.sh"})
        finally:
            await shell.aclose()
        passed = (await ws.run_tests()).success if sealed else await _unsealed_tests(ws)
        if not passed:
            raise RuntimeError(f"{task.name}: the solution did not pass ({'sealed' if sealed else 'before'})")
    finally:
        await ws.aclose()
    return time.monotonic() - start


def child(mode: str, names: list[str], per_task: int, looks: int) -> None:
    from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_task

    async def go():
        times = {}
        for name in names:
            task = load_task(DEFAULT_TASKS_DIR / name)
            times[name] = [await _episode(task, mode == "after", looks) for _ in range(per_task)]
        return times

    print(json.dumps(asyncio.run(go())))


def run_mode(mode: str, names: list[str], per_task: int, looks: int) -> dict[str, list[float]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if mode == "before":
        env["SLIME_SANDBOX_BUDGETS"] = "off"
    proc = subprocess.run([sys.executable, __file__, "--child", mode, "--names", ",".join(names),
                           "--episodes-per-task", str(per_task), "--looks", str(looks)], env=env, capture_output=True,
                          text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"the {mode} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=0, help="the first N shipped tasks (0: all)")
    parser.add_argument("--episodes-per-task", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--looks", type=int, default=8, help="shell_exec looks per episode besides the first look "
                                                             "and the solution (default 8)")
    parser.add_argument("--child", choices=("before", "after"), help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.names.split(","), args.episodes_per_task, args.looks)
        return 0
    from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_tasks

    names = [t.name for t in load_tasks(DEFAULT_TASKS_DIR) if t.solution_script is not None]
    names = names[:args.tasks] if args.tasks else names
    times: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    start = time.monotonic()
    for r in range(args.rounds):
        for mode in ("before", "after") if r % 2 == 0 else ("after", "before"):
            for name, values in run_mode(mode, names, args.episodes_per_task, args.looks).items():
                times[mode].setdefault(name, []).extend(values)
            done = sum(len(v) for m in times.values() for v in m.values())
            total = 2 * args.rounds * len(names) * args.episodes_per_task
            rate = done / (time.monotonic() - start)
            print(f"round {r + 1}/{args.rounds} {mode}: {done}/{total} episodes, {rate:.2f} episodes/s, "
                  f"eta {(total - done) / rate:.0f} s", flush=True)
    rows = []
    for name in names:
        before, after = statistics.median(times["before"][name]), statistics.median(times["after"][name])
        rows.append((name, before, after))
        print(f"{name:30s} before {before:.3f} s  after {after:.3f} s  ({100 * (after / before - 1):+.1f} %)")
    before = statistics.median(v for m in times["before"].values() for v in m)
    after = statistics.median(v for m in times["after"].values() for v in m)
    value = 100.0 * (after / before - 1.0)
    print(f"episode environment time ({args.looks + 2} commands): median {before:.3f} s before, {after:.3f} s after "
          f"({len(names)} tasks x {args.episodes_per_task} episodes x {args.rounds} rounds each)")
    print(f"RESULT sealing_cost value={value:.1f} target=<=10 {'PASS' if value <= 10 else 'FAIL'}")
    return 0 if value <= 10 else 1


if __name__ == "__main__":
    sys.exit(main())
