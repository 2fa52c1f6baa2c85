"""Verified demonstrations for the terminal warm start: scripted solutions through the real service and shell tools,
kept only when the tests pass, as SFT rows whose prompt is what the loop renders at that turn."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import SYSTEM_PROMPT
from slime.agentic.agent_loop import parse_tool_calls
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR
from terminal_demonstrations import FINAL_ANSWER, demonstrate, solution_command
from slime.agentic.terminal.tasks import load_task

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def test_demonstrations_are_verified_rows_in_the_loops_layout(tmp_path, tiny_model_path):
    from transformers import AutoTokenizer

    from slime.rollout.sft_rollout import segment_ids

    tasks = [load_task(DEFAULT_TASKS_DIR / name) for name in ("count-error-lines", "fix-python-stats")]
    with PoolServerProcess(PoolSettings(provider="terminal", state_dir=str(tmp_path / "pool"))) as pool:
        async def go():
            async with EnvClient(pool.url) as env:
                return await demonstrate(env, tasks)

        rows, failed = asyncio.run(go())
    assert failed == [] and len(rows) == 3 * len(tasks)  # look, solve, answer
    first, solve, answer = rows[:3]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"] and first["prompt"][0]["content"] == SYSTEM_PROMPT
    assert first["prompt"][1]["content"].startswith("Task name:count-error-lines\nTask instruction: ")
    assert [m["role"] for m in solve["prompt"]] == ["system", "user", "assistant", "tool"]
    assert "app.log" in solve["prompt"][-1]["content"]  # the real listing of /app the shell returned
    [call] = parse_tool_calls(solve["metadata"]["segments"][0]["text"]).calls
    assert (call.name, call.arguments["command"]) == ("shell_exec", solution_command(tasks[0]))
    assert answer["metadata"]["segments"] == [{"text": FINAL_ANSWER, "loss": 1}]
    assert [t["function"]["name"] for t in first["metadata"]["tools"]][0] == "shell_exec"
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    ids, mask, length = segment_ids(tok, solve["prompt"], solve["metadata"]["segments"], solve["metadata"]["tools"])
    assert length == sum(mask) and 0 < length < len(ids)  # the turn's tokens (and its end of turn) train


def test_the_solution_runs_in_a_subshell_so_it_cannot_end_the_session():
    command = solution_command(load_task(DEFAULT_TASKS_DIR / "count-error-lines"))
    assert command.startswith("(\n") and command.endswith("\n)") and "#!" not in command
