"""Load on the environment service: concurrent episodes of a scripted agent across several pool servers.

    python bench/env_service_load.py [--setting terminal|swe] [--episodes 64] [--rounds 3] [--workers 2]
        [--max-runs-per-task 8]

Each round starts `--episodes` episodes at once through the router (real pool server processes). `--setting
terminal` (the default): the `terminal` provider (a task's sandboxed workspace with `setup.sh` done, tmux shell
sessions, the task's tests), and every episode is the scripted agent that runs the task's `solution.sh` through
`shell_exec` (the shipped tasks in turn), so every episode must end `completed` with reward 1.0. `--setting swe`: the
`swe` provider (a fresh git tree of the instance in the sandbox, the sealed evaluation in another fresh tree), and
every episode is the scripted agent that applies the instance's gold patch with `git apply` through the bash loop
and submits (the shipped instances in turn), so every episode must be resolved by its submitted patch. Anything
else is a failed episode. Allocations beyond a pool server's capacity get 429 and wait (the client's
back-pressure), as a trainer's would.

Measured in the same run: episodes per second, p50/p99 of `exec_tool` as the client sees it (a blocking
`shell_exec`, or a `bash` command), of `reset` (the workspace or the fresh tree) and of `evaluate` (the tests);
429s absorbed; the pool servers' RSS after each round (flat across rounds: no leak); and after the service stops,
processes left of the sandbox uids and lease directories (work trees) left on disk; after every round, before
anything stops, the leases still open (all of these must be 0). Last line:
`RESULT env_service_load value=<failed episodes + leases left open after a round + leaked processes + leaked
directories> target=<=0 PASS|FAIL`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "slime"))
# the method folders' episode loops: terminal-rl/generate.py, swe-rl/generate_with_swe_remote.py
sys.path[:0] = [str(REPO / "terminal-rl"), str(REPO / "swe-rl")]

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import EnvService
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.swe.instances import load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES
from slime.agentic.agent_loop import ScriptedTurnPolicy
from slime.agentic.terminal.scripted import solution_turns
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_tasks

import generate_with_swe_remote as swe_agent  # noqa: E402
from generate import AgentSettings, run_episode  # noqa: E402


class TimedClient(EnvClient):
    """The real client, timing each call as the agent's loop sees it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times: dict[str, list[float]] = {"exec_tool": [], "reset": [], "evaluate": []}

    async def _timed(self, name, coro):
        start = time.perf_counter()
        try:
            return await coro
        finally:
            self.times[name].append(time.perf_counter() - start)

    async def exec_tool(self, lease_id, name, arguments):
        return await self._timed("exec_tool", super().exec_tool(lease_id, name, arguments))

    async def reset(self, lease_id, *args, **kwargs):
        return await self._timed("reset", super().reset(lease_id, *args, **kwargs))

    async def evaluate(self, lease_id, **request):
        return await self._timed("evaluate", super().evaluate(lease_id, **request))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def terminal_episode(client: TimedClient, task, request_id: str):
    """A task's solution.sh through shell_exec; None when the episode succeeded, else what went wrong."""
    meta = {"task_name": task.name, "task_path": task.name, "instruction": task.instruction}
    result = await run_episode(ScriptedTurnPolicy(solution_turns(task)), client, f"{task.name}:{task.name}", meta,
                               AgentSettings(), request_id=request_id)
    if result.status == "completed" and result.reward == 1.0:
        return None
    return f"{result.task_key} {result.status} {result.stop_reason} {result.evaluation}"


async def swe_episode(client: TimedClient, instance, request_id: str):
    """The gold patch applied through the bash loop and submitted; None when it resolved the instance."""
    policy = swe_agent.ScriptedSwePolicy(swe_agent.gold_patch_responses(instance.patch))
    result = await swe_agent.run_episode(policy, client, instance.instance_id, swe_agent.AgentSettings(max_steps=4),
                                         request_id=request_id)
    if result.resolved and result.patch_source == "submitted":
        return None
    return f"{instance.instance_id} {result.status} {result.exit_status} {result.patch_source} {result.evaluation}"


async def one_round(client: TimedClient, items, episodes: int, offset: int, run_one) -> list:
    async def episode(k: int):
        try:
            return await run_one(client, items[(offset + k) % len(items)], f"load:{offset}:{k}")
        except Exception as e:  # a failed episode is counted, not fatal
            return repr(e)

    return await asyncio.gather(*(episode(k) for k in range(episodes)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=64, help="concurrent episodes per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="pool servers behind the router")
    parser.add_argument("--max-tasks", type=int, default=16)
    parser.add_argument("--max-runs-per-task", type=int, default=8)
    parser.add_argument("--setting", choices=["terminal", "swe"], default="terminal")
    parser.add_argument("--tasks-dir", default=str(DEFAULT_TASKS_DIR), help="--setting terminal: the tasks")
    parser.add_argument("--instances", default=str(DEFAULT_INSTANCES), help="--setting swe: the instances")
    args = parser.parse_args()
    if args.setting == "terminal":
        items = [t for t in load_tasks(args.tasks_dir) if t.solution_script is not None]
        options, run_one, kind = {"tasks_dir": args.tasks_dir}, terminal_episode, "tasks"
    else:
        items = load_instances(args.instances)
        options, run_one, kind = {"instances": os.path.abspath(args.instances)}, swe_episode, "instances"
    state = tempfile.mkdtemp(prefix="env-load-")
    settings = PoolSettings(provider=args.setting, state_dir=state, max_tasks=args.max_tasks,
                            max_runs_per_task=args.max_runs_per_task, provider_options=options)
    uids = sb.default_uid_pool().uids
    print(f"env_service_load ({args.setting}): {args.rounds} rounds x {args.episodes} concurrent episodes over "
          f"{args.workers} pool servers, {len(items)} {kind}, capacity {args.max_tasks} tasks x "
          f"{args.max_runs_per_task} runs per server", flush=True)
    failed, rss_rounds, open_leases, wall = [], [], [], 0.0
    with EnvService(settings, workers=args.workers) as service:
        async def run_all():
            async with TimedClient(service.url, allocate_backoff_s=0.2) as client:
                nonlocal wall
                for r in range(args.rounds):
                    start = time.perf_counter()
                    results = await one_round(client, items, args.episodes, r * args.episodes, run_one)
                    took = time.perf_counter() - start
                    wall += took
                    bad = [x for x in results if x is not None]
                    failed.extend(bad)
                    status = (await client.status())["router" if args.workers > 1 else "pool"]
                    open_leases.append(status["total_active_runs"])  # every episode closed its lease
                    rss = [rss_mb(p.process.pid) for p in service.pools]
                    rss_rounds.append(rss)
                    print(f"  round {r + 1}: {args.episodes} episodes in {took:.1f} s "
                          f"({args.episodes / took:.2f}/s), {len(bad)} failed, {open_leases[-1]} leases left open, "
                          "pool RSS "
                          + ", ".join(f"{m:.0f} MB" for m in rss), flush=True)
                    for x in bad[:3]:
                        print(f"    failed: {x}", flush=True)
                return client.times, client.counters

        times, counters = asyncio.run(run_all())
    deadline = time.monotonic() + 10
    while sb.uid_processes(uids) and time.monotonic() < deadline:
        time.sleep(0.2)
    leaked_procs = len(sb.uid_processes(uids))
    leaked_dirs = sum(len(os.listdir(os.path.join(state, d, "leases")))
                      for d in os.listdir(state) if os.path.isdir(os.path.join(state, d, "leases")))
    total = args.episodes * args.rounds
    for name, values in times.items():
        print(f"  {name}: n={len(values)} p50 {percentile(values, 0.5) * 1000:.0f} ms, "
              f"p99 {percentile(values, 0.99) * 1000:.0f} ms, mean {statistics.mean(values) * 1000:.0f} ms")
    print(f"  {total} episodes in {wall:.1f} s ({total / wall:.2f} episodes/s); 429s absorbed by the client: "
          f"{counters['back_pressure']}; pool RSS first round {[round(m) for m in rss_rounds[0]]} MB, last "
          f"{[round(m) for m in rss_rounds[-1]]} MB")
    print(f"  failed episodes {len(failed)}, leases left open after a round {sum(open_leases)}, leaked processes "
          f"{leaked_procs}, leaked lease directories {leaked_dirs}")
    value = len(failed) + sum(open_leases) + leaked_procs + leaked_dirs
    print(f"RESULT env_service_load value={value} target=<=0 {'PASS' if value <= 0 else 'FAIL'}")
    return 0 if value <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
