"""Hostile agent input through a real terminal pool server: each case ends as a tool error or an observation and a
scored episode, never an exception that drops the sample (issue 37, item 4). The unpaired surrogate raised
UnicodeEncodeError out of the episode before tool-call JSON was read with `loads_tool_json`."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import AgentSettings, run_episode
from slime.agentic.agent_loop import ScriptedTurnPolicy, tool_call_text
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_task

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def shell(command: str) -> str:
    return tool_call_text("shell_exec", {"id": "main", "command": command})


CASES = {  # case -> (turns, what the first tool observation must show)
    "nul byte": ([shell("echo a\x00b")], "must not contain NUL"),
    "unpaired surrogate": (['<tool_call>\n{"name": "shell_exec", "arguments": {"id": "main", "command": '
                            '"echo \\ud800"}}\n</tool_call>'], "unpaired surrogate"),
    "command over the argument limit": ([shell("echo " + "x" * 300_000)], "xxxx"),
    "bytes that are not UTF-8": ([shell("printf '\\377\\376 ok'; touch \"$(printf 'n\\377')\"; ls")], "ok"),
    "a stopped, TERM-ignoring child": ([shell("sleep 100 & kill -STOP $!; trap '' TERM; echo stopped")], "stopped"),
}


def test_hostile_input_ends_as_an_observation_and_a_scored_episode(tmp_path):
    name = "count-error-lines"
    task = load_task(DEFAULT_TASKS_DIR / name)
    meta = {"task_name": name, "task_path": name, "instruction": task.instruction}

    async def go(url):
        async with EnvClient(url) as env:
            return await asyncio.gather(*(run_episode(ScriptedTurnPolicy(turns), env, f"{name}:{i}", meta,
                                                      AgentSettings())
                                          for i, (turns, _) in enumerate(CASES.values())))

    with PoolServerProcess(PoolSettings(provider="terminal", state_dir=str(tmp_path))) as server:
        episodes = asyncio.run(go(server.url))
    for (case, (_, shown)), episode in zip(CASES.items(), episodes):
        first = next(m["content"] for m in episode.messages if m["role"] == "tool")
        assert shown in first, (case, first[:300])
        assert episode.status == "completed" and episode.reward == -1.0, (case, episode.status, episode.reward)
