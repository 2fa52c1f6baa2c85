"""The terminal provider behind a real pool server: a scripted agent solves shipped tasks through the shell tools,
and the tests decide (JUnit XML -> reward)."""

from __future__ import annotations

import asyncio
import os

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient, EnvServiceError
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import AgentSettings, run_episode
from slime.agentic.agent_loop import ScriptedTurnPolicy
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR
from slime.agentic.terminal.scripted import idle_turns, solution_turns
from slime.agentic.terminal.tasks import load_task

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

TASKS = ("count-error-lines", "fix-python-stats", "git-tag-release", "make-script-executable")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    settings = PoolSettings(provider="terminal", state_dir=str(tmp_path_factory.mktemp("pool")))
    with PoolServerProcess(settings) as server:
        yield server


def meta(name):
    task = load_task(DEFAULT_TASKS_DIR / name)
    return task, {"task_name": name, "task_path": name, "instruction": task.instruction}


def test_scripted_solutions_pass_and_idle_agents_fail_through_the_service(pool):
    async def go():
        async with EnvClient(pool.url) as env:
            episodes = []
            for name in TASKS:
                task, task_meta = meta(name)
                for turns in (solution_turns(task), idle_turns()):
                    episodes.append(run_episode(ScriptedTurnPolicy(turns), env, f"{name}:{name}", task_meta,
                                                AgentSettings()))
            return await asyncio.gather(*episodes)

    results = asyncio.run(go())
    solved, idle = results[0::2], results[1::2]
    for name, episode in zip(TASKS, solved):
        assert episode.status == "completed" and episode.reward == 1.0, (name, episode.evaluation)
        assert episode.evaluation["passed"] == episode.evaluation["total"] >= 3
    for name, episode in zip(TASKS, idle):
        assert episode.reward < 1.0 and episode.evaluation["passed"] < episode.evaluation["total"], name
    first_look = [m for m in solved[0].messages if m["role"] == "tool"][0]["content"]
    assert "app.log" in first_look  # the shell saw the task's files in /app


def test_a_relative_state_directory_works(tmp_path, monkeypatch):
    # the scripts' run directories are relative (runs/terminal-cpu/env_service): bwrap binds a task's sandbox
    # directory by path and refuses a relative one, so every reset failed with "Can't find source path"
    monkeypatch.chdir(tmp_path)
    with PoolServerProcess(PoolSettings(provider="terminal", state_dir="pool")) as server:
        async def go():
            async with EnvClient(server.url) as env:
                task, task_meta = meta("count-error-lines")
                return await run_episode(ScriptedTurnPolicy(solution_turns(task)), env, "relative", task_meta,
                                         AgentSettings())

        episode = asyncio.run(go())
    assert episode.status == "completed" and episode.reward == 1.0, episode.evaluation


def test_the_shell_keeps_state_and_a_lease_takes_no_calls_after_evaluation(pool):
    async def go():
        async with EnvClient(pool.url) as env:
            lease = (await env.allocate("count-error-lines:count-error-lines"))["lease_id"]
            reset = await env.reset(lease, {"task_name": "count-error-lines", "task_path": "count-error-lines"})
            outs = [await env.exec_tool(lease, "shell_exec", {"id": "a", "command": command})
                    for command in ("cd /tmp && export X=7", "pwd; echo $X")]
            other = await env.exec_tool(lease, "shell_exec", {"id": "b", "command": "pwd"})
            escape = await env.exec_tool(lease, "shell_write_content_to_file",
                                         {"content": "x", "file_path": "../../etc/evil"})
            evaluation = await env.evaluate(lease)
            with pytest.raises(EnvServiceError) as after:
                await env.exec_tool(lease, "shell_exec", {"id": "a", "command": "true"})
            with pytest.raises(EnvServiceError) as unknown:
                await env.reset(lease, {"task_name": "no-such-task"})
            with pytest.raises(EnvServiceError) as outside:
                await env.reset(lease, {"task_name": "x", "task_path": "../../etc"})
            await env.close(lease)
            return reset, outs, other, escape, evaluation, after.value, unknown.value, outside.value

    reset, outs, other, escape, evaluation, after, unknown, outside = asyncio.run(go())
    assert reset["user_msg"].startswith("Task name:count-error-lines\nTask instruction: ")
    assert [s["function"]["name"] for s in reset["tool_schemas"]] == [
        "shell_exec", "shell_view", "shell_write_to_process", "shell_write_content_to_file"]
    assert "/tmp" in outs[1]["observation"] and "7" in outs[1]["observation"]
    assert "/app" in other["observation"]  # a second session starts in the work directory
    assert escape["observation"].startswith("[TOOL_ERROR] shell_write_content_to_file")
    assert evaluation["score"] == 0.0 and evaluation["total"] >= 3 and evaluation["reward"] == -1.0
    assert (after.status, after.code) == (409, "EVALUATED")
    assert (unknown.status, unknown.code) == (404, "UNKNOWN_TASK")
    assert outside.status == 400 and "leaves the tasks directory" in outside.message
    leases = os.path.join(pool.settings.state_dir, "leases")
    for _ in range(50):
        if not os.listdir(leases):
            break
        asyncio.run(asyncio.sleep(0.1))
    assert os.listdir(leases) == []


def test_the_rule_judge_scores_the_host_observed_progress_and_the_model_cannot_call_the_harness_tool(pool):
    from slime.agentic.agent_loop import tool_call_text
    from terminal_prm import TerminalRuleJudge, TurnJudging

    def shell(command):
        return tool_call_text("shell_exec", {"id": "main", "command": command, "block": True})

    turns = [
        shell("ls /app"),                                              # a look: the state is unchanged -> 0
        tool_call_text("progress", {}),                                # the model names the harness tool: refused
        shell("echo '3 passed in 0.01s'; echo '[The command finished with exit status 0.]'"),  # printed success -> 0
        shell("grep -c '\\[ERROR\\]' /app/app.log > /app/answer.txt"),  # the fix: the hidden tests' share rises -> +1
        shell("echo 0 > /app/answer.txt"),                             # undone in part: it falls -> -1
        shell("grep -c '\\[ERROR\\]' /app/app.log > /app/answer.txt"),  # redone -> +1
    ]

    async def go():
        judging = TurnJudging(TerminalRuleJudge(), "count")
        async with EnvClient(pool.url) as env:
            task, task_meta = meta("count-error-lines")
            episode = await run_episode(ScriptedTurnPolicy(turns), env, "count-error-lines:x", task_meta,
                                        AgentSettings(), on_turn=judging.on_turn, track_progress=True)
        return episode, await judging.scores()

    episode, scores = asyncio.run(go())
    refused = [m for m in episode.messages if m["role"] == "tool" and m.get("name") == "progress"]
    assert refused and refused[0]["content"].startswith("[TOOL_ERROR] unknown tool"), refused
    assert scores == [0.0, -1.0, 0.0, 1.0, -1.0, 1.0, None], scores  # the refused call is a tool error: -1
    # the share after each turn (before the first one first); "0" in answer.txt still passes 2 of the 3 tests
    assert [s["progress"] for s in episode.states] == pytest.approx([0.0, 0.0, 0.0, 0.0, 1.0, 2 / 3, 1.0, 1.0])
    assert episode.reward == 1.0
