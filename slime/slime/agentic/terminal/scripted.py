"""Scripted terminal agents: turns that solve a task with its own `solution.sh` through the shell tools, or that do
nothing. They drive the whole path (service, leases, shell sessions, tests) with a known outcome: the load test, the
tests of the loop, and the warm-start demonstrations of a policy too small to act."""

from __future__ import annotations

import base64

from slime.agentic.agent_loop import tool_call_text
from .tasks import TerminalTask


def solution_turns(task: TerminalTask, session: str = "main") -> list[str]:
    """Look around, then run the task's solution.sh in a shell session (sent base64-encoded on one line, so no
    quoting of the script can break the command), then answer."""
    if task.solution_script is None:
        raise ValueError(f"task {task.name!r} has no solution.sh")
    script = base64.b64encode(task.solution_script.read_bytes()).decode()
    return [
        tool_call_text("shell_exec", {"id": session, "command": "ls -la /app"}, "Let me look at the working directory."),
        tool_call_text("shell_exec", {"id": session, "command": f"echo {script} | base64 -d > /tmp/solution.sh && "
                                                                 "bash /tmp/solution.sh; echo exit=$?",
                                      "block": True, "timeout": 60}, "Now I run my solution."),
    ]


def idle_turns(session: str = "main") -> list[str]:
    """Look around and stop without doing the task."""
    return [tool_call_text("shell_exec", {"id": session, "command": "ls -la /app"}, "Let me look first.")]
