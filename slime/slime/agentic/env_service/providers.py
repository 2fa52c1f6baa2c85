"""What a pool server leases: a provider makes, resets, drives, scores and removes one environment per lease.

The pool (`pool.py`) owns leases, capacity and timing; a provider owns the environment itself. Terminal, SWE and
GUI each bring one; a provider is chosen by name (`PROVIDERS`) or as `module:factory` (called with the settings'
`provider_options` as keyword arguments), the same way judges are plugins.

    class MyProvider:
        name = "mine"
        async def reset(self, lease: LeaseContext, request: dict) -> tuple[object, dict]   # (env, reply)
        async def exec_tool(self, env, tool_call: dict) -> dict                              # {"observation": str, ...}
        async def evaluate(self, env, request: dict) -> dict                                 # {"score": float, ...}
        async def close(self, env) -> None
        def resources(self, env) -> dict            # what to record on disk (e.g. {"uid": 60012})
        def reap(self, resources: dict) -> None     # after a crash: clean up what such a record names (plus
                                                    # its "lease_id", also when nothing was recorded yet)

`reset` is called on a lease's first reset and again on every later one (the pool closes the previous
environment first). A provider raises `ProviderError(status, message)` for a client mistake (unknown task, bad
arguments): the server answers that status; anything else is a 500 with the exception's type and message.
"""

from __future__ import annotations

import importlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

from slime.agentic import sandbox as sb
from slime.agentic.docker_sandbox import ping_daemon, remove_container, remove_labelled

logger = logging.getLogger(__name__)


class ProviderError(Exception):
    def __init__(self, status: int, message: str, code: str = "BAD_REQUEST"):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class ReapDeferred(RuntimeError):
    """A provider's `reap` could not even try (e.g. the Docker daemon the record names does not answer): the pool
    keeps the record open for a later start without counting it as a failed attempt."""


@dataclass(frozen=True)
class LeaseContext:
    lease_id: str
    task_key: str
    workdir: str  # a fresh directory for this lease's environment, removed by the pool after close


class EnvProvider(Protocol):
    name: str

    async def reset(self, lease: LeaseContext, request: dict) -> tuple[Any, dict]: ...

    async def exec_tool(self, env: Any, tool_call: dict) -> dict: ...

    async def evaluate(self, env: Any, request: dict) -> dict: ...

    async def close(self, env: Any) -> None: ...

    def resources(self, env: Any) -> dict: ...

    def reap(self, resources: dict) -> None: ...


# ------------------------------------------------------------------------------------------ command provider

RUN_COMMAND_SCHEMA = {
    "type": "function",
    "function": {
        "name": "run_command",
        "description": "Run a bash command in the working directory and return its exit code and output.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the command line, run with bash -lc"},
                "timeout": {"type": "number", "description": "seconds before the command is killed (default 30)"},
            },
            "required": ["command"],
        },
    },
}


@dataclass
class CommandEnv:
    box: sb.Sandbox
    evaluate_command: str | None = None


class CommandProvider:
    """One sandbox per lease (the project's bubblewrap sandbox, work directory at `/work`), one tool:
    `run_command` (one-shot `bash -lc` with a timeout, return code and output, truncated at the sandbox).
    `evaluate` runs `request["command"]` (or the reset's `task_meta["evaluate_command"]`) and scores 1.0 when it
    exits 0, else 0.0. The base for settings whose tool is "run a command" (SWE's exec); tests of the service."""

    name = "command"
    tool_name = "run_command"

    def __init__(self, isolation: str = "bwrap", mount_at: str = "/work", default_timeout: float = 30.0,
                 max_timeout: float = 240.0, max_output_bytes: int = 64 * 1024):
        self.isolation = isolation
        self.mount_at = mount_at or None
        self.default_timeout = float(default_timeout)
        self.max_timeout = float(max_timeout)
        self.limits = sb.SandboxLimits(max_output_bytes=int(max_output_bytes))

    async def reset(self, lease: LeaseContext, request: dict) -> tuple[CommandEnv, dict]:
        task_meta = request.get("task_meta") or {}
        if not isinstance(task_meta, dict):
            raise ProviderError(400, "task_meta must be an object")
        box = sb.Sandbox(lease.workdir, isolation=self.isolation, limits=self.limits,
                         mount_at=self.mount_at if self.isolation == "bwrap" else None)
        env = CommandEnv(box, task_meta.get("evaluate_command"))
        setup = task_meta.get("setup_command")
        if setup:
            result = await box.run(str(setup), timeout=self.max_timeout)
            if not result.ok:
                await self.close(env)
                raise ProviderError(422, f"setup_command failed (exit {result.exit_code}): {result.stderr[-500:]}",
                                    code="SETUP_FAILED")
        instruction = task_meta.get("instruction", "")
        return env, {"user_msg": f"Task name:{lease.task_key}\nTask instruction: {instruction}",
                     "tool_schemas": [RUN_COMMAND_SCHEMA]}

    def _timeout(self, value) -> float:
        if value is None:
            return self.default_timeout
        try:
            timeout = float(value)
        except (TypeError, ValueError):
            raise ProviderError(400, f"timeout must be a number, got {value!r}") from None
        if not 0 < timeout <= self.max_timeout:
            raise ProviderError(400, f"timeout must be in (0, {self.max_timeout:g}] seconds, got {timeout:g}")
        return timeout

    async def exec_tool(self, env: CommandEnv, tool_call: dict) -> dict:
        name, arguments = tool_call.get("name"), tool_call.get("arguments") or {}
        if name != self.tool_name:
            return {"observation": f"[TOOL_ERROR] unknown tool: {name}"}
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            return {"observation": "[TOOL_ERROR] run_command: 'command' must be a non-empty string"}
        try:
            timeout = self._timeout(arguments.get("timeout"))
        except ProviderError as e:
            return {"observation": f"[TOOL_ERROR] run_command: {e.message}"}
        result = await env.box.run(command, timeout=timeout)
        return {"observation": render_result(result), "exit_code": result.exit_code, "timed_out": result.timed_out}

    async def evaluate(self, env: CommandEnv, request: dict) -> dict:
        command = request.get("command") or getattr(env, "evaluate_command", None)
        if not command:
            raise ProviderError(400, "evaluate needs a command (request 'command' or task_meta 'evaluate_command')")
        result = await env.box.run(str(command), timeout=self._timeout(request.get("timeout") or self.max_timeout))
        return {"score": 1.0 if result.ok else 0.0, "exit_code": result.exit_code, "timed_out": result.timed_out,
                "output": render_result(result)}

    async def close(self, env: CommandEnv) -> None:
        await env.box.aclose()

    def resources(self, env: CommandEnv) -> dict:
        return {"uid": env.box.uid, "path": env.box.path}

    def reap(self, resources: dict) -> None:
        reap_sandbox_uid(resources)


def reap_sandbox_uid(resources: dict) -> None:
    """A sandbox-backed provider's `reap`: the recorded uid's leftover processes, normally none (bubblewrap's
    --die-with-parent took them with the server); a uid leased again since then belongs to a live sandbox and is
    left alone (`sandbox.reap_uid`)."""
    uid = resources.get("uid")
    if isinstance(uid, int):
        sb.reap_uid(uid)


LEASE_LABEL = "slime.lease"  # on every container of a lease: its lease id
# `reset` answers a fresh token under this key; the harness's own tools (the step judge's progress: what the task's
# hidden tests say of the current state) answer only a call that carries it. The loop keeps it out of the model's
# messages, so a policy that names such a tool gets a tool error, never a look at the grader.
HARNESS_TOKEN_KEY = "harness_token"
PROGRESS_TOOL = "progress"  # the harness's tool of the terminal provider (the SWE provider's is `diff` + progress)


def budget_reply(observation: str, exceeded: str) -> dict:
    """A tool call's reply once the sandbox went over a whole-sandbox budget (slime.agentic.cgroups, sandbox_disk):
    the observation says so, and ``episode_over`` tells the agent loop to stop and have the episode scored (-1)."""
    note = f"[The sandbox {exceeded}. The episode is over: no more commands run.]"
    return {"observation": f"{observation}\n{note}" if observation else note, "episode_over": True,
            "budget_exceeded": exceeded}


def new_harness_token() -> str:
    return secrets.token_hex(16)


def harness_call(arguments: dict, token: str) -> bool:
    """Whether a tool call's `arguments` carry the lease's harness token."""
    given = arguments.get(HARNESS_TOKEN_KEY) if isinstance(arguments, dict) else None
    return isinstance(given, str) and secrets.compare_digest(given, token)
REAP_TIMEOUT_S = 10.0  # each docker call of a reap at start (and the daemon's probe): before /healthz answers


class LeaseReaper:
    """`reap` of a provider whose leases are sandboxes, bubblewrap or Docker containers (terminal, SWE): the recorded
    container, every container labelled with the lease id (a reset a crash cut short recorded none; only when
    containers are in play: the record names one, or this server runs docker), then the uid's leftover processes.
    Each step runs whatever the others did; when one failed, this raises (after all of them), so the pool keeps the
    record open and a later start tries again. Each daemon is probed once per start: one that is down or hung costs
    its records nothing more (they stay open, ReapDeferred) and the server still starts within seconds."""

    def __init__(self, what: str, *, docker: bool, docker_host: str | None = None):
        self.what, self.docker, self.docker_host = what, docker, docker_host
        self._daemons: dict[str | None, str] = {}  # host -> "" (answers) or why it does not

    def __call__(self, resources: dict) -> None:
        errors = []
        container, lease_id = resources.get("container"), resources.get("lease_id")
        host = resources.get("docker_host") or self.docker_host
        docker = isinstance(container, str) or (isinstance(lease_id, str) and self.docker)
        if docker:
            if host not in self._daemons:
                try:
                    ping_daemon(host, timeout=REAP_TIMEOUT_S)
                    self._daemons[host] = ""
                except Exception as e:
                    self._daemons[host] = str(e)
            if self._daemons[host]:
                raise ReapDeferred(f"the Docker daemon {host or '(default)'} does not answer: {self._daemons[host]}")
        steps = []
        if isinstance(container, str):
            steps.append((f"remove container {container}",
                          lambda: remove_container(container, docker_host=host, timeout=REAP_TIMEOUT_S)))
        if isinstance(lease_id, str) and docker:
            steps.append((f"remove the containers of lease {lease_id}",
                          lambda: remove_labelled(f"{LEASE_LABEL}={lease_id}", docker_host=host,
                                                  timeout=REAP_TIMEOUT_S)))
        steps.append(("reap the sandbox uid", lambda: reap_sandbox_uid(resources)))
        for what, step in steps:
            try:
                step()
            except Exception as e:  # the next step still runs
                logger.warning("%s provider: reap: could not %s: %s", self.what, what, e)
                errors.append(f"{what}: {e}")
        if errors:
            raise RuntimeError("; ".join(errors))


def render_result(result: sb.SandboxResult) -> str:
    """A command's result as the agent sees it: output, then the exit status on its own line."""
    parts = [result.stdout]
    if result.stderr:
        parts.append(result.stderr)
    text = "\n".join(p.rstrip("\n") for p in parts if p)
    status = "timed out (killed)" if result.timed_out else f"exit code {result.exit_code}"
    return f"{text}\n[{status}]" if text else f"[{status}]"


# ------------------------------------------------------------------------------------------ registry

# a string is imported when first used, so a pool server loads only the provider it serves
PROVIDERS = {"command": CommandProvider, "terminal": "slime.agentic.terminal.provider:TerminalProvider",
             "swe": "slime.agentic.swe.provider:SweProvider", "gui": "slime.agentic.gui.provider:GuiProvider"}


def register_provider(name: str, factory) -> None:
    PROVIDERS[name] = factory


def make_provider(spec: str, options: dict | None = None) -> EnvProvider:
    """A provider from a registered name (`command`, `terminal`, ...) or `module:factory`."""
    options = dict(options or {})
    if spec in PROVIDERS and callable(PROVIDERS[spec]):
        return PROVIDERS[spec](**options)
    module, sep, attr = (PROVIDERS.get(spec) or spec).partition(":")
    if not sep:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {spec!r}: use one of {known} or 'module:factory'")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"provider {spec!r} cannot be loaded: {e}") from e
    return factory(**options)
