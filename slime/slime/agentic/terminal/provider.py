"""The environment service's `terminal` provider: a lease holds one task's workspace (its sandbox with `/app`
and the hidden `/tests`, `setup.sh` done) and persistent tmux shell sessions in it; the tools are the four shell
tools (`tools=upstream`, the default) or shell_exec with a command only (`tools=lean`: 226 prompt tokens of system
prompt and tool schema instead of 913); `evaluate` stops the shells and runs the task's tests (JUnit XML -> passed / total).

    python -m slime.agentic.env_service.pool_server --provider terminal --provider-option tasks_dir=terminal-rl/tasks

Backends (`backend=`): `bwrap` (the default: the project's bubblewrap sandbox) or `docker` (one container per lease,
`slime.agentic.docker_sandbox`; terminal-rl/README.md, "Docker backend"):

    python -m slime.agentic.env_service.pool_server --provider terminal --provider-option backend=docker \
        --provider-option image=slime-terminal-base      # or a terminal-bench image per task: image=tb__{task}

With `build_images=true` (Docker only) a task that has a Dockerfile runs in the image built from its own Dockerfile
and context (`task_images.build_task_image`: stand-ins for the base images that cannot be pulled, the offline test
runners, cached by content), as root in the Dockerfile's WORKDIR with the image's pytest plugins and (a root agent's) the agent's
processes still running during the tests, as Terminal-Bench runs it; a task without a Dockerfile gets `image`. A build that fails is a 422 `BUILD_FAILED` naming why.

`image` may name the task as `{task}` (the result must be a Docker image reference: checked at start and per task);
`docker_user` (default: an unprivileged uid of the sandbox pool; `root` as terminal-bench runs its agents; any other
user of the image, resolved to its uid:gid in the container) and `docker_host` (default `$DOCKER_HOST`, else
scripts/setup_docker.sh's daemon) go to the sandbox. A container outlives a crashed server: its name is recorded with
the lease, and every container is labelled with its lease id, so a restarted server removes it (`reap`), also one
started by a reset that the crash cut short before the record was written; a reap that fails leaves the record open
for the next start.

`reset`'s `task_meta` is upstream's `{task_name, task_path, instruction}`: the task folder is `task_path` under the
provider's `tasks_dir` (it must stay inside it), else the folder named `task_name`. The instruction the agent sees
is the task's own (`task.yaml`), as upstream's `user_msg`. After `evaluate` a lease takes no more tool calls
(409 `EVALUATED`); reset it to start over.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from slime.agentic.docker_sandbox import DEFAULT_IMAGE, ContainerGone, check_user, task_image
from slime.agentic.sandbox import SandboxLimits, SandboxUnavailable
from slime.agentic.env_service.providers import (
    HARNESS_TOKEN_KEY,
    LEASE_LABEL,
    PROGRESS_TOOL,
    LeaseContext,
    LeaseReaper,
    ProviderError,
    budget_reply,
    harness_call,
    new_harness_token,
)
from slime.agentic.shell_sessions import (
    DEFAULT_BLOCK_TIMEOUT,
    DEFAULT_MAX_OUTPUT_CHARS,
    TOOL_PROFILES,
    ShellSessions,
)

from .task_images import ImageBuildError, TaskImage, build_task_image
from .tasks import DEFAULT_TASKS_DIR, TaskFormatError, TerminalTask, load_task
from .workspace import APP_DIR, TaskSetupError, TaskWorkspace, keeps_agent_processes

logger = logging.getLogger(__name__)

BACKENDS = ("bwrap", "docker")


@dataclass
class TerminalEnv:
    task: TerminalTask
    workspace: TaskWorkspace
    shell: ShellSessions
    evaluated: bool = False
    harness_token: str = field(default_factory=new_harness_token)
    progress: dict = field(default_factory=dict)  # /app fingerprint -> pass fraction of a state evaluation (or None)
    over_budget: str = ""  # the whole-sandbox budget the episode went over (it is then over: reward -1)


def _flag(value) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")



class TerminalProvider:
    name = "terminal"

    def __init__(self, tasks_dir: str | os.PathLike | None = None, block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
                 max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS, include_kill_tool: bool | str = False,
                 setup_timeout_s: float = 120.0, backend: str = "bwrap", image: str = DEFAULT_IMAGE,
                 docker_user: str | None = None, docker_host: str | None = None,
                 memory_budget_mb: float | None = None, cpu_budget: float | None = None,
                 max_processes: int | None = None, disk_budget_mb: float | None = None, file_budget: int | None = None,
                 tools: str = "upstream", build_images: bool | str = False):
        if backend not in BACKENDS:
            raise ValueError(f"terminal provider: backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.backend = backend
        # a task with a Dockerfile runs in the image built from it (task_images: once per content, then reused), as
        # Terminal-Bench runs it; tasks without one use `image`
        self.build_images = _flag(build_images)
        if self.build_images and backend != "docker":
            raise ValueError("terminal provider: build_images=true needs backend=docker")
        # one build per task folder, shared by the resets of every event loop (a thread's future, not a loop's)
        self._built: dict[str, concurrent.futures.Future] = {}
        self._builder = (concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="task-image")
                         if self.build_images else None)
        task_image(image, "task")  # a malformed image (or template) or user is refused here, not at the first episode
        if docker_user:
            check_user(docker_user)
        self.image, self.docker_user, self.docker_host = image, docker_user or None, docker_host or None
        self._reaper = LeaseReaper("terminal", docker=backend == "docker", docker_host=self.docker_host)
        self.tasks_dir = Path(tasks_dir or os.environ.get("TERMINAL_TASKS_DIR") or DEFAULT_TASKS_DIR).resolve()
        if not self.tasks_dir.is_dir():
            raise ValueError(f"terminal provider: tasks_dir {self.tasks_dir} is not a directory")
        self.block_timeout = float(block_timeout)
        self.max_output_chars = int(max_output_chars)
        self.include_kill_tool = _flag(include_kill_tool)
        if tools not in TOOL_PROFILES:
            raise ValueError(f"terminal provider: tools must be one of {', '.join(TOOL_PROFILES)}, got {tools!r}")
        self.tools = tools  # the tool profile: upstream's four shell tools, or `lean` (shell_exec with a command)
        self.setup_timeout_s = float(setup_timeout_s)
        self._tasks: dict[Path, TerminalTask] = {}
        # each lease's whole-sandbox budgets (the sandbox's defaults where not given); going over one ends the episode
        budgets = {"memory_budget_bytes": None if memory_budget_mb is None else int(float(memory_budget_mb) * (1 << 20)),
                   "cpu_budget": None if cpu_budget is None else float(cpu_budget),
                   "max_processes": None if max_processes is None else int(max_processes),
                   "disk_budget_bytes": None if disk_budget_mb is None else int(float(disk_budget_mb) * (1 << 20)),
                   "file_budget": None if file_budget is None else int(file_budget)}
        self.limits = SandboxLimits(**{k: v for k, v in budgets.items() if v is not None})

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
        docker, own_image, services = None, False, None
        if self.backend == "docker" and self.build_images and task.dockerfile is not None:
            built = await self._task_image(task)
            services = built.services  # its compose services, started beside the agent's container
            # as Terminal-Bench runs a task: the image's root (unless docker_user says otherwise), its WORKDIR, the
            # pytest plugins its author installed
            docker = {"image": built.tag, "workdir": built.workdir, "user": self.docker_user or "root",
                      "docker_host": self.docker_host, "labels": {LEASE_LABEL: lease.lease_id}}
            own_image = True
        elif self.backend == "docker":
            try:
                image = task_image(self.image, task.name)
            except ValueError as e:
                raise ProviderError(422, f"task {task.name!r}: {e}", code="BAD_IMAGE") from None
            docker = {"image": image, "user": self.docker_user, "docker_host": self.docker_host,
                      "labels": {LEASE_LABEL: lease.lease_id}}
        try:
            workspace = await TaskWorkspace.create(task, base_dir=lease.workdir, setup_timeout_s=self.setup_timeout_s,
                                                   docker=docker, limits=self.limits,
                                                   autoload_pytest_plugins=own_image,
                                                   services=services, keep_agent_processes=(
                                                       own_image and keeps_agent_processes(docker["user"])))
        except TaskSetupError as e:
            raise ProviderError(422, str(e), code="SETUP_FAILED") from None
        shell = ShellSessions(workspace.sandbox, workdir=APP_DIR, block_timeout=self.block_timeout,
                              max_output_chars=self.max_output_chars, tools=self.tools)
        env = TerminalEnv(task, workspace, shell)
        return env, {"user_msg": f"Task name:{task.name}\nTask instruction: {task.instruction}",
                     "tool_schemas": shell.tool_schemas(self.include_kill_tool), "task_name": task.name,
                     HARNESS_TOKEN_KEY: env.harness_token}

    async def _task_image(self, task: TerminalTask) -> TaskImage:
        """The task's own image, built once per task folder and server (concurrent resets wait for one build; a
        failed build is tried again at the next reset)."""
        key = str(task.path)
        if key not in self._built or (self._built[key].done() and self._built[key].exception() is not None):
            self._built[key] = self._builder.submit(build_task_image, task, docker_host=self.docker_host)
        try:
            return await asyncio.shield(asyncio.wrap_future(self._built[key]))
        except (ImageBuildError, SandboxUnavailable) as e:
            raise ProviderError(422, f"task {task.name!r}: its image cannot be built: {e}",
                                code="BUILD_FAILED") from None

    async def exec_tool(self, env: TerminalEnv, tool_call: dict) -> dict:
        if env.evaluated:
            raise ProviderError(409, "this lease was evaluated: reset it to start a new episode", code="EVALUATED")
        name, arguments = tool_call.get("name"), tool_call.get("arguments") or {}
        if name == PROGRESS_TOOL and harness_call(arguments, env.harness_token):
            return await self.progress(env)
        if env.over_budget:
            return budget_reply("", env.over_budget)
        observation = await env.shell.call_tool(name, arguments)
        env.over_budget = env.workspace.sandbox.budget_exceeded()
        return budget_reply(observation, env.over_budget) if env.over_budget else {"observation": observation}

    async def progress(self, env: TerminalEnv) -> dict:
        """The harness's look at the state (the rule step judge's facts): /app's fingerprint and, once per distinct
        fingerprint, the share of the task's tests that pass on a copy of it (None on the Docker backend)."""
        fingerprint = await env.workspace.state_fingerprint()
        if fingerprint not in env.progress:
            outcome = await env.workspace.evaluate_state()
            env.progress[fingerprint] = None if outcome is None else (0.0 if outcome.tampered else outcome.accuracy)
        return {"observation": "", "fingerprint": fingerprint, "progress": env.progress[fingerprint]}

    async def evaluate(self, env: TerminalEnv, request: dict) -> dict:
        try:
            if not env.workspace.keep_agent_processes:
                await env.shell.aclose()  # the tests need the sandbox (one process tree at a time): the shells end
            # (keep mode: the shells and what they started run on beside the tests, which end them)
        except ContainerGone as e:  # the episode stopped its container: run_tests scores that (reward -1)
            if not env.workspace.sandbox.stopped_in_episode(e):
                raise
        env.evaluated = True
        env.over_budget = env.over_budget or env.workspace.sandbox.budget_exceeded()
        if env.over_budget:  # the episode ended there: no test runs, the reward is -1
            reason = f"the sandbox {env.over_budget}"
            return {"score": 0.0, "task": env.task.name, "passed": 0, "total": 0, "failed": 0, "errors": 0,
                    "skipped": 0, "accuracy": 0.0, "reward": -1.0, "success": False, "timed_out": False,
                    "exit_code": None, "duration_s": 0.0, "reason": reason, "outcomes": {}, "tampered": False,
                    "budget_exceeded": env.over_budget}
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
        box = env.workspace.sandbox
        out = {"uid": box.uid, "path": str(env.workspace.root), "task": env.task.name}
        if self.backend == "docker":
            out.update(container=box.name, docker_host=box.docker_host)
        return out

    def reap(self, resources: dict) -> None:
        self._reaper(resources)
