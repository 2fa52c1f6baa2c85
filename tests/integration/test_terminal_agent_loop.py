"""The terminal agent's loop against a real pool server (the `command` provider's sandbox), with scripted turns."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import AgentSettings, run_episode
from slime.agentic.agent_loop import PARSE_ERROR_NAME, ScriptedTurnPolicy, tool_call_text

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

TASK = {"instruction": "write the number of lines of data.txt to answer.txt",
        "setup_command": "printf 'a\\nb\\nc\\n' > data.txt", "evaluate_command": 'test "$(cat answer.txt)" = 3'}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with PoolServerProcess(PoolSettings(state_dir=str(tmp_path_factory.mktemp("pool")))) as server:
        yield server


def episode(pool, turns, settings=AgentSettings()):
    async def go():
        async with EnvClient(pool.url) as env:
            result = await run_episode(ScriptedTurnPolicy(turns), env, "count", TASK, settings, request_id="r")
            status = await env.status()
            return result, status
    return asyncio.run(go())


def test_a_solving_episode_ends_on_the_answer_and_is_rewarded(pool):
    result, status = episode(pool, [
        tool_call_text("run_command", {"command": "cat data.txt"}, "First look at the file."),
        tool_call_text("run_command", {"command": "wc -l < data.txt > answer.txt"})])
    assert (result.status, result.stop_reason) == ("completed", "final_answer")
    assert len(result.turns) == 3 and result.tool_calls == 2 and result.reward == 1.0
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "a\nb\nc\n[exit code 0]"
    assert status["pool"]["total_active_runs"] == 0  # the lease was closed


def test_doing_nothing_is_tested_and_gets_minus_one(pool):
    result, _ = episode(pool, [], AgentSettings())
    assert result.status == "completed" and len(result.turns) == 1 and result.reward == -1.0


def test_parse_errors_end_the_episode_as_failed_without_evaluation(pool):
    bad = "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"ls\"\n</tool_call>"
    result, _ = episode(pool, [bad] * 5, AgentSettings(max_parse_errors=3))
    assert (result.status, result.stop_reason, result.parse_errors) == ("failed", "parse_errors", 3)
    assert result.evaluation is None and len(result.turns) == 3
    errors = [m for m in result.messages if m.get("name") == PARSE_ERROR_NAME]
    assert len(errors) == 3 and errors[0]["content"].startswith("JSON Parse Error: the tool call is not valid JSON")


def test_the_step_budget_truncates_and_a_truncated_episode_is_still_tested(pool):
    turns = [tool_call_text("run_command", {"command": "wc -l < data.txt > answer.txt"})] + \
        [tool_call_text("run_command", {"command": "true"})] * 5
    result, _ = episode(pool, turns, AgentSettings(max_steps=3))
    assert (result.status, result.stop_reason, len(result.turns)) == ("truncated", "max_steps", 3)
    assert result.reward == 1.0


def test_several_calls_in_one_turn_run_in_order(pool):
    both = (tool_call_text("run_command", {"command": "wc -l < data.txt > answer.txt"})
            + "\n" + tool_call_text("run_command", {"command": "cat answer.txt"}))
    result, _ = episode(pool, [both])
    assert result.tool_calls == 2 and len(result.turns) == 2 and result.reward == 1.0
    assert [m["content"] for m in result.messages if m["role"] == "tool"] == ["[exit code 0]", "3\n[exit code 0]"]


def test_an_empty_final_message_fails_the_episode_without_evaluation(pool):
    result, _ = episode(pool, [tool_call_text("run_command", {"command": "true"}), "   "])
    assert (result.status, result.stop_reason) == ("failed", "empty_final_message") and result.evaluation is None


def test_a_call_over_the_environments_time_limit_is_an_observation_not_a_failed_episode(tmp_path):
    with PoolServerProcess(PoolSettings(state_dir=str(tmp_path / "pool"), exec_timeout_s=1.0)) as slow:
        result, _ = episode(slow, [tool_call_text("run_command", {"command": "sleep 5", "timeout": 10}),
                                   tool_call_text("run_command", {"command": "wc -l < data.txt > answer.txt"})])
    observations = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert observations[0].startswith("[TOOL_ERROR] run_command: no answer within the environment's time limit")
    assert result.status == "completed" and result.reward == 1.0  # the episode went on and was tested
