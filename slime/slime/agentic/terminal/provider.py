"""The environment service's `terminal` provider: a lease holds one task's workspace (its sandbox with `/app`
and the hidden `/tests`, `setup.sh` done) and persistent tmux shell sessions in it; the tools are the four shell
tools; `evaluate` stops the shells and runs the task's tests (JUnit XML -> passed / total).

    python -m slime.agentic.env_service.pool_server --provider terminal --provider-option tasks_dir=terminal-rl/tasks

`reset`'s `task_meta` is upstream's `{task_name, task_path, instruction}`: the task folder is `task_path` under the
provider's `tasks_dir` (it must stay inside it), else the folder named `task_name`. The instruction the agent sees
is the task's own (`task.yaml`), as upstream's `user_msg`. After `evaluate` a lease takes no more tool calls
(409 `EVALUATED`); reset it to start over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slime.agentic.env_service.providers import (
    LeaseContext,
    ProviderError,
    reap_sandbox_uid,
)
from slime.agentic.shell_sessions import (
    DEFAULT_BLOCK_TIMEOUT,
    DEFAULT_MAX_OUTPUT_CHARS,
    ShellSessions,
)

from .tasks import DEFAULT_TASKS_DIR, TaskFormatError, TerminalTask, load_task
from .workspace import APP_DIR, TaskSetupError, TaskWorkspace


@dataclass
class TerminalEnv:
    task: TerminalTask
    workspace: TaskWorkspace
    shell: ShellSessions
    evaluated: bool = False


def _flag(value) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


class TerminalProvider:
    name = "terminal"

    def __init__(self, tasks_dir: str | os.PathLike | None = None, block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
                 max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS, include_kill_tool: bool | str = False,
                 setup_timeout_s: float = 120.0):
        self.tasks_dir = Path(tasks_dir or os.environ.get("TERMINAL_TASKS_DIR") or DEFAULT_TASKS_DIR).resolve()
        if not self.tasks_dir.is_dir():
            raise ValueError(f"terminal provider: tasks_dir {self.tasks_dir} is not a directory")
        self.block_timeout = float(block_timeout)
        self.max_output_chars = int(max_output_chars)
        self.include_kill_tool = _flag(include_kill_tool)
        self.setup_timeout_s = float(setup_timeout_s)
        self._tasks: dict[Path, TerminalTask] = {}

    def task_for(self, task_meta: dict) -> TerminalTask:
        if not isinstance(task_meta, dict):
            raise ProviderError(400, "task_meta must be an object with task_name (and task_path)")
        relative = task_meta.get("task_path") or task_meta.get("task_name")
        if not isinstance(relative, str) or not relative.strip():
            raise ProviderError(400, "task_meta needs task_name or task_path (a task folder under the tasks dir)")
        folder = (self.tasks_dir / relative).resolve()
        if folder != self.tasks_dir and self.tasks_dir not in folder.parents:
            raise ProviderError(400, f"task_path {relative!r} leaves the tasks directory")
        if folder not in self._tasks:
            if not folder.is_dir():
                raise ProviderError(404, f"no task {relative!r} under the tasks directory", code="UNKNOWN_TASK")
            try:
                self._tasks[folder] = load_task(folder)
            except TaskFormatError as e:
                raise ProviderError(422, str(e), code="BAD_TASK") from None
        return self._tasks[folder]

    async def reset(self, lease: LeaseContext, request: dict) -> tuple[TerminalEnv, dict]:
        task = self.task_for(request.get("task_meta") or {})
        try:
            workspace = await TaskWorkspace.create(task, base_dir=lease.workdir, setup_timeout_s=self.setup_timeout_s)
        except TaskSetupError as e:
            raise ProviderError(422, str(e), code="SETUP_FAILED") from None
        shell = ShellSessions(workspace.sandbox, workdir=APP_DIR, block_timeout=self.block_timeout,
                              max_output_chars=self.max_output_chars)
        env = TerminalEnv(task, workspace, shell)
        return env, {"user_msg": f"Task name:{task.name}\nTask instruction: {task.instruction}",
                     "tool_schemas": shell.tool_schemas(self.include_kill_tool), "task_name": task.name}

    async def exec_tool(self, env: TerminalEnv, tool_call: dict) -> dict:
        if env.evaluated:
            raise ProviderError(409, "this lease was evaluated: reset it to start a new episode", code="EVALUATED")
        return {"observation": await env.shell.call_tool(tool_call.get("name"), tool_call.get("arguments") or {})}

    async def evaluate(self, env: TerminalEnv, request: dict) -> dict:
        await env.shell.aclose()  # the tests need the sandbox (one process tree at a time): the shells end here
        env.evaluated = True
        timeouts = request.get("task_timeouts") or {}
        limit = timeouts.get("eval") if isinstance(timeouts, dict) else None
        outcome = await env.workspace.run_tests(timeout=float(limit) if isinstance(limit, (int, float)) and limit > 0
                                                else None)
        return {"score": outcome.accuracy, **outcome.as_dict()}

    async def close(self, env: TerminalEnv) -> None:
        try:
            await env.shell.aclose()
        finally:
            await env.workspace.aclose()

    def resources(self, env: TerminalEnv) -> dict:
        return {"uid": env.workspace.sandbox.uid, "path": str(env.workspace.root), "task": env.task.name}

    def reap(self, resources: dict) -> None:
        reap_sandbox_uid(resources)
