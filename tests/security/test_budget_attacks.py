"""Adversarial terminal agents against the whole-sandbox budgets (issue 37), through a real pool server: on every
shipped task one turn spreads memory over many processes, floods processes, fills the disk and the file table at
once. The episode ends (the provider says so and stops running commands), scores -1, the pool keeps serving, and
nothing is left on the host (no mount, no control group, no process of a sandbox uid)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slime.agentic import cgroups, fs_tree
from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import AgentSettings, run_episode
from slime.agentic.agent_loop import ScriptedTurnPolicy, tool_call_text
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_task

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not (_CAP.available and _CAP.budgets),
                                reason=f"no bwrap sandbox with budgets here: {_CAP.problem or 'budgets off'}")

TASKS = sorted(p.name for p in Path(DEFAULT_TASKS_DIR).iterdir() if (p / "task.yaml").exists())
BUDGETS = {"memory_budget_mb": 256, "max_processes": 48, "disk_budget_mb": 64, "file_budget": 2000}
HOG = "python3 -c 'import time; b = bytearray(60 << 20); b[::4096] = bytes(len(b[::4096])); time.sleep(0.5)'"
FLOOD = (f"(for i in $(seq 6); do {HOG} & done; for i in $(seq 100); do sleep 0.5 & done; "
         "head -c 100M /dev/zero > /app/flood; "
         "python3 -c 'import os\nfor i in range(5000): open(\"/app/f%d\" % i, \"w\").close()'; wait) 2>/dev/null; "
         "echo flooded")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    state = tmp_path_factory.mktemp("pool")
    with PoolServerProcess(PoolSettings(provider="terminal", state_dir=str(state), provider_options=BUDGETS)) as server:
        yield server, state


def test_every_task_ends_at_its_budget_scores_minus_one_and_leaves_nothing(pool):
    server, state = pool
    turns = [tool_call_text("shell_exec", {"id": "main", "command": FLOOD, "block": True, "timeout": 60}),
             tool_call_text("shell_exec", {"id": "main", "command": "echo never runs"})]

    async def go():
        async def one(name):
            task = load_task(DEFAULT_TASKS_DIR / name)
            meta = {"task_name": name, "task_path": name, "instruction": task.instruction}
            return await run_episode(ScriptedTurnPolicy(list(turns)), env, f"{name}:b", meta, AgentSettings())

        async with EnvClient(server.url) as env:
            out = []
            for i in range(0, len(TASKS), 4):  # four sandboxes at their budgets at once: the host must stay usable
                out += await asyncio.gather(*(one(name) for name in TASKS[i:i + 4]))
            return out, await env.status()

    episodes, status = asyncio.run(go())
    for name, episode in zip(TASKS, episodes):
        assert (episode.status, episode.stop_reason) == ("completed", "budget_exceeded"), (name, episode.stop_reason)
        assert episode.reward == -1.0 and "budget" in episode.evaluation["reason"], (name, episode.evaluation)
        assert episode.tool_calls == 1  # the second call was never sent: the episode was over
        last = [m for m in episode.messages if m["role"] == "tool"][-1]["content"]
        assert "The episode is over" in last, (name, last[-300:])
    hit = {k for e in episodes for k in ("memory", "process", "disk", "file") if k in e.evaluation["reason"]}
    assert hit >= {"memory", "disk"}, hit  # which ones trip first varies; memory and the disk always do
    assert status["pool"]["total_active_runs"] == 0
    assert fs_tree.mounts_below(state) == []
    assert not [d for _, parent in cgroups.detect().parents for d in Path(parent).glob("slime-sandbox-*")
                if (d / "cgroup.procs").read_text().split()]
    first, count = sb.DEFAULT_UID_RANGE
    assert sb.uid_processes(range(first, first + count)) == []
