"""The terminal provider's lean tool profile (`tools=lean`, `--terminal-tools lean`) behind a real pool server:
one tool, shell_exec with a command only, run in one persistent session; the demonstrations follow the profile;
upstream's profile still requires a session id; an unknown profile is refused."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.shell_sessions import tool_schemas
from generate import LEAN_SYSTEM_PROMPT, SYSTEM_PROMPT, AgentSettings, system_prompt_for
from terminal_demonstrations import demonstrate, demonstration_turns
from slime.agentic.terminal.provider import TerminalProvider
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR, load_task

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

TASK = "count-error-lines"


@pytest.fixture(scope="module")
def lean_pool(tmp_path_factory):
    settings = PoolSettings(provider="terminal", state_dir=str(tmp_path_factory.mktemp("pool")),
                            provider_options={"tools": "lean"})
    with PoolServerProcess(settings) as server:
        yield server


def test_the_lean_profile_declares_one_tool_with_a_command_and_keeps_the_shell_between_calls(lean_pool):
    task_meta = {"task_name": TASK, "task_path": TASK}

    async def go():
        async with EnvClient(lean_pool.url) as env:
            lease = (await env.allocate(f"{TASK}:{TASK}"))["lease_id"]
            try:
                reset = await env.reset(lease, task_meta)
                first = await env.exec_tool(lease, "shell_exec", {"command": "cd /app && X=41 && ls"})
                second = await env.exec_tool(lease, "shell_exec", {"command": "echo $((X + 1)) $PWD"})
                named = await env.exec_tool(lease, "shell_exec", {"id": "main", "command": "echo $X"})
                return reset, first, second, named
            finally:
                await env.close(lease)

    reset, first, second, named = asyncio.run(go())
    assert [t["function"]["name"] for t in reset["tool_schemas"]] == ["shell_exec"]
    assert reset["tool_schemas"][0]["function"]["parameters"]["required"] == ["command"]
    assert "app.log" in first["observation"]
    assert "42 /app" in second["observation"]  # the same session: its variables and directory stayed
    assert "41" in named["observation"]  # the session has a name, and a call that gives it reaches it


def test_lean_demonstrations_solve_in_one_tool_turn(lean_pool):
    task = load_task(DEFAULT_TASKS_DIR / TASK)
    turns = demonstration_turns(task, tools="lean")
    assert len(turns) == 1 and '"id"' not in turns[0] and "grep" in turns[0]

    async def go():
        async with EnvClient(lean_pool.url) as env:
            return await demonstrate(env, [task], tools="lean")

    rows, failed = asyncio.run(go())
    assert failed == [] and len(rows) == 2  # the tool turn and the answer
    assert rows[0]["prompt"][0] == {"role": "system", "content": LEAN_SYSTEM_PROMPT}
    assert [t["function"]["name"] for t in rows[0]["metadata"]["tools"]] == ["shell_exec"]


def test_the_profiles_and_their_prompts():
    assert system_prompt_for("lean") == LEAN_SYSTEM_PROMPT and system_prompt_for("upstream") == SYSTEM_PROMPT
    assert AgentSettings.from_args(type("A", (), {"terminal_tools": "lean"})()).system_prompt == LEAN_SYSTEM_PROMPT
    assert AgentSettings.from_args(type("A", (), {})()).system_prompt == SYSTEM_PROMPT
    assert len(tool_schemas()) == 4 and "id" in tool_schemas()[0]["function"]["parameters"]["required"]
    with pytest.raises(ValueError, match="tools must be one of upstream, lean"):
        TerminalProvider(tools="tiny")
    with pytest.raises(ValueError, match="tool profile must be one of"):
        tool_schemas(profile="tiny")


def test_upstream_profile_still_requires_a_session_id(tmp_path):
    settings = PoolSettings(provider="terminal", state_dir=str(tmp_path / "pool"))

    async def go(url):
        async with EnvClient(url) as env:
            lease = (await env.allocate(f"{TASK}:{TASK}"))["lease_id"]
            try:
                await env.reset(lease, {"task_name": TASK, "task_path": TASK})
                return await env.exec_tool(lease, "shell_exec", {"command": "ls"})
            finally:
                await env.close(lease)

    with PoolServerProcess(settings) as server:
        reply = asyncio.run(go(server.url))
    assert reply["observation"].startswith("[TOOL_ERROR] shell_exec: missing required argument 'id'")
