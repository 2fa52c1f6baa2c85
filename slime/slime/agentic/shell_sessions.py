"""Persistent shell sessions in a sandbox, driven through tmux, and the four upstream shell tools.

Upstream terminal RL gave the agent CAMEL's ``TerminalToolkit`` (camel-ai) with a tmux terminal in a Docker
container. Here each lease is a :class:`~slime.agentic.sandbox.Sandbox` (no network, read-only system, private
work directory, unprivileged uid, rlimits), or a :class:`~slime.agentic.docker_sandbox.DockerSandbox` (a container
of a terminal-bench image), and :class:`ShellSessions` keeps named shell sessions alive in it across tool calls:
``cd``, exported and shell variables, functions and background jobs persist between calls, two sessions are
independent.

How: ``Sandbox.spawn`` starts one long-lived *shell host* (:mod:`slime.agentic.shell_host`, stdlib only) inside
the sandbox with the sandbox's interpreter (``sandbox.python``: the project's, or the image's python3). It runs a tmux server on a socket in the sandbox's private ``/tmp``
and answers JSON-line requests on its stdin. Every tmux client command runs inside the sandbox; nothing on this
side connects to a socket the sandbox controls. Everything the host sends is treated as untrusted: each reply is
one line of bounded length, read with a timeout, parsed and type-checked; a host that dies, hangs, floods or
answers nonsense gives a clear :class:`ShellError` (a ``[TOOL_ERROR]`` observation from :meth:`call_tool`),
never a hang. A dead host is restarted on the next call (its sessions are gone, and the next observation says
so) up to ``max_restarts`` times; the end of its lifetime (``lifetime_s``) is final.

Tools (OpenAI function format, argument names as CAMEL's ``TerminalToolkit``; :data:`TOOL_SCHEMAS`)::

    shell_exec(id, command, block=True, timeout=None)   run a command in session `id` (created on first use)
    shell_view(id)                                      new output of that session since the last read
    shell_write_to_process(id, command)                 a line of input to the running command ('^C' interrupts)
    shell_write_content_to_file(content, file_path)     write a file (confined to the work directory)

plus ``shell_kill_process(id)`` (:data:`KILL_TOOL_SCHEMA`, not in the default list; upstream's prompt names it
but its tool list did not have it), and :meth:`ShellSessions.call_tool`, which always returns an observation
string: ``[TOOL_ERROR] unknown tool: NAME``, ``[TOOL_ERROR] NAME: <what is wrong>`` for a bad argument or a
failure, else the tool's output.

Semantics: a blocking ``shell_exec`` returns the command's output once it finishes, or after ``timeout``
(default ``block_timeout``, 20 s as upstream; capped at ``max_block_timeout``) what it printed so far and a note
that it is still running; the session stays usable (view it, answer it, or interrupt it with ``^C`` through
``shell_write_to_process``). Non-blocking starts the command and returns at once. A session runs one command
at a time: ``shell_exec`` on a session whose command still runs is refused with what to do instead. Output is
rendered as a terminal would show it (colours and other escapes removed, carriage returns overwrite, invalid
UTF-8 replaced) and cut to ``max_output_chars`` at head and tail with a marker saying how much was left out.

    async with Sandbox(mount_at="/app") as box, ShellSessions(box) as shell:
        await shell.call_tool("shell_exec", {"id": "main", "command": "cd src && export X=1"})
        print(await shell.call_tool("shell_exec", {"id": "main", "command": "pwd; echo $X"}))  # /app/src, 1
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Self

from slime.agentic import fs_tree
from slime.agentic.sandbox import (
    SandboxBase,
    SandboxError,
    SandboxLimits,
    SandboxProcess,
    SandboxResult,
    SandboxUnavailable,
    reachable_by_others,
)

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_TIMEOUT = 20.0  # upstream TerminalToolkit(timeout=20.0)
DEFAULT_MAX_OUTPUT_CHARS = 10_000
TOOL_NAMES = ("shell_exec", "shell_view", "shell_write_to_process", "shell_write_content_to_file")
KILL_TOOL_NAME = "shell_kill_process"
MAX_ID_CHARS = 64
CONTROL_INPUTS = ("^C", "^D", "^Z", "^\\", "\x03", "\x04", "\x1a", "\x1c")

# ------------------------------------------------------------------------------------------------ schemas


def _function(name: str, description: str, params: dict[str, tuple[str, str, bool]]) -> dict:
    """An OpenAI tool schema in the shape CAMEL's FunctionTool produces (strict mode: every argument listed as
    required, an optional one typed [T, "null"], no other properties)."""
    properties = {
        arg: {"type": [typ, "null"] if optional else typ, "description": desc} for arg, (typ, desc, optional) in params.items()
    }
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "strict": True,
            "parameters": {"type": "object", "properties": properties, "required": list(params), "additionalProperties": False},
        },
    }


SHELL_EXEC_SCHEMA = _function(
    "shell_exec",
    "Run a shell command in a persistent shell session, blocking (wait for it to finish and return its output)"
    " or non-blocking (start it in the background and return at once).\n"
    "Each session keeps its state between calls (current directory, variables, background jobs). A session"
    " runs one command at a time.",
    {
        "id": ("string", "Name of the shell session to use; a new session is started the first time a name is used.", False),
        "command": ("string", "The shell command to run (bash syntax; several lines are allowed).", False),
        "block": (
            "boolean",
            (
                "true (the default): wait until the command finishes and return all of its output; use this for"
                " most commands. false: start the command and return immediately; use this for servers, long jobs"
                " and interactive programs, then read its output with shell_view and answer it with"
                " shell_write_to_process."
            ),
            True,
        ),
        "timeout": (
            "number",
            (
                "Blocking mode only: seconds to wait for the command (default 20). A command still running then"
                " keeps running in its session; check it later with shell_view(id)."
            ),
            True,
        ),
    },
)
SHELL_VIEW_SCHEMA = _function(
    "shell_view",
    "Show the output a session produced since it was last read (returns at once, never waits). Use it to follow"
    " a command started with block=false, or one that outlived its timeout.",
    {"id": ("string", "Name of the shell session.", False)},
)
SHELL_WRITE_TO_PROCESS_SCHEMA = _function(
    "shell_write_to_process",
    "Send a line of input to the command running in a session (for example the answer to a prompt); a newline"
    " is added. Returns the output produced once the command goes quiet. Send exactly ^C to interrupt the"
    " command (^D, ^Z and ^\\ send those control keys).",
    {
        "id": ("string", "Name of the shell session whose running command gets the input.", False),
        "command": ("string", "The text to type (a newline is added), or a control key such as ^C.", False),
    },
)
SHELL_WRITE_CONTENT_TO_FILE_SCHEMA = _function(
    "shell_write_content_to_file",
    "Write text to a file, replacing what it held, creating missing parent directories. The best way to create"
    " a script or a multi-line file.",
    {
        "content": ("string", "The full text to write to the file.", False),
        "file_path": ("string", "Path of the file: relative to the working directory, or absolute inside it.", False),
    },
)
KILL_TOOL_SCHEMA = _function(
    "shell_kill_process",
    "Stop a session: kill its shell and everything running in it. The name can be used again afterwards for a"
    " fresh session.",
    {"id": ("string", "Name of the shell session to stop.", False)},
)
TOOL_SCHEMAS = (SHELL_EXEC_SCHEMA, SHELL_VIEW_SCHEMA, SHELL_WRITE_TO_PROCESS_SCHEMA, SHELL_WRITE_CONTENT_TO_FILE_SCHEMA)
# The lean profile: shell_exec alone, with the command as its only argument (one session, LEAN_SESSION, blocking).
# Every prompt carries the tool schemas: with Qwen2.5's chat template the system prompt and upstream's four tools are
# 913 tokens, the lean ones 226, which makes a CPU training step on a 0.5B model about 3x cheaper (terminal-rl/README.md).
LEAN_SESSION = "main"
SHELL_EXEC_LEAN_SCHEMA = _function(
    "shell_exec",
    "Run a bash command in a persistent shell (working directory /app) and return its output.",
    {"command": ("string", "The command to run (several lines are allowed).", False)},
)
TOOL_PROFILES = ("upstream", "lean")


def tool_schemas(include_kill: bool = False, profile: str = "upstream") -> list[dict]:
    """Fresh copies of the tool schemas: `upstream` (the four upstream tools, optionally shell_kill_process too) or
    `lean` (shell_exec with a command only)."""
    if profile not in TOOL_PROFILES:
        raise ValueError(f"tool profile must be one of {', '.join(TOOL_PROFILES)}, got {profile!r}")
    if profile == "lean":
        return [copy.deepcopy(SHELL_EXEC_LEAN_SCHEMA)]
    return [copy.deepcopy(s) for s in TOOL_SCHEMAS + ((KILL_TOOL_SCHEMA,) if include_kill else ())]


# ------------------------------------------------------------------------------------------------ pure helpers


class ShellError(RuntimeError):
    """The shell host failed: it died, did not answer in time, or answered something malformed."""


class ToolArgumentError(ValueError):
    """A tool call's arguments are wrong; the message names the argument and what is expected."""


class SessionBusy(ShellError):
    """The session still runs a command."""


def truncate_middle(text: str, max_chars: int) -> str:
    """`text` cut to about `max_chars` characters: its head and tail, with a marker saying how much is missing."""
    if len(text) <= max_chars:
        return text
    omitted = len(text) - max_chars
    head = max_chars - max_chars // 2
    tail = max_chars // 2
    return text[:head] + f"\n[... {omitted} characters omitted ...]\n" + (text[len(text) - tail :] if tail else "")


def check_session_id(value: Any, arg: str = "id") -> str:
    if not isinstance(value, str):
        raise ToolArgumentError(f"argument '{arg}' must be a string (a session name), got {type(value).__name__}")
    if not value.strip():
        raise ToolArgumentError(f"argument '{arg}' must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise ToolArgumentError(f"argument '{arg}' is longer than {MAX_ID_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ToolArgumentError(f"argument '{arg}' must not contain control characters")
    return value


def resolve_in_workdir(path: Any, workdir: str) -> str:
    """`path` (relative to `workdir`, or absolute inside it) as a normalised absolute path inside `workdir`;
    ToolArgumentError when it is empty or leaves it (``..``, another absolute path). Symlinks are checked again
    inside the sandbox, where the write happens."""
    if not isinstance(path, str):
        raise ToolArgumentError(f"argument 'file_path' must be a string, got {type(path).__name__}")
    if not path.strip():
        raise ToolArgumentError("argument 'file_path' must not be empty")
    if "\0" in path:
        raise ToolArgumentError("argument 'file_path' must not contain NUL characters")
    if len(path) > 4096:
        raise ToolArgumentError("argument 'file_path' is longer than 4096 characters")
    wd = os.path.normpath(workdir)
    target = os.path.normpath(os.path.join(wd, path))
    if not target.startswith(wd.rstrip("/") + "/"):
        raise ToolArgumentError(f"file_path {path!r} is outside the working directory {wd} (write files inside it)")
    if path.endswith("/"):
        raise ToolArgumentError(f"file_path {path!r} names a directory, not a file")
    return target


def _check_arguments(tool: str, arguments: Any, spec: dict[str, tuple[type | tuple, bool]]) -> dict:
    """The tool's arguments as a dict: a JSON string is parsed; unknown names, missing required ones and wrong
    types raise ToolArgumentError naming the argument. `spec`: name -> (accepted types, required)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            raise ToolArgumentError(f"arguments are not valid JSON ({e.msg} at position {e.pos})") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    unknown = sorted(set(arguments) - set(spec), key=str)
    if unknown:
        raise ToolArgumentError(f"unexpected argument {unknown[0]!r} (accepted: {', '.join(spec)})")
    out = {}
    for name, (types, required) in spec.items():
        value = arguments.get(name)
        if value is None:
            if required:
                raise ToolArgumentError(f"missing required argument '{name}'")
            continue
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise ToolArgumentError(f"argument '{name}' must be {_type_words(types)}, got a boolean")
        if not isinstance(value, types):
            raise ToolArgumentError(f"argument '{name}' must be {_type_words(types)}, got {type(value).__name__} {_short(value)}")
        out[name] = value
    return out


def _type_words(types) -> str:
    names = {str: "a string", bool: "true or false", int: "a number", float: "a number"}
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join(dict.fromkeys(names.get(t, t.__name__) for t in types))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@lru_cache(maxsize=1)
def host_source() -> str:
    """The shell host program's source (run inside the sandbox with ``python -u -c``)."""
    return (Path(__file__).with_name("shell_host.py")).read_text()


# ------------------------------------------------------------------------------------------------ results


@dataclass
class ShellOutput:
    """What one call saw of a session."""

    output: str  # new output since the last read, rendered and truncated
    running: bool = False  # a command is (still) running in the session
    finished: bool = False  # the command finished (during this call, or since the last read)
    exit_status: int | None = None  # of the command that finished
    alive: bool = True  # False: the session's shell exited (the session is gone)
    omitted_bytes: int = 0  # bytes of output left out in the middle
    started: bool = False  # non-blocking exec: the command was started
    screen: str | None = None  # view of a full-screen program (it draws with escapes, so the screen is shown)
    elapsed_s: float = 0.0


# ------------------------------------------------------------------------------------------------ sessions


class ShellSessions:
    """Named persistent shell sessions in `sandbox`, one shell host process (started by :meth:`start` or the
    first call; stopped by :meth:`aclose`). The sandbox is busy meanwhile (its `run` refuses): run other
    commands with :meth:`run`, which executes them in the same namespace as the sessions."""

    def __init__(
        self,
        sandbox: SandboxBase,
        *,
        workdir: str | None = None,
        block_timeout: float = DEFAULT_BLOCK_TIMEOUT,
        max_block_timeout: float = 120.0,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        max_sessions: int = 8,
        max_file_bytes: int = 4 << 20,
        width: int = 160,
        height: int = 48,
        lifetime_s: float = 3600.0,
        limits: SandboxLimits | None = None,
        python: str | None = None,
        env: dict[str, str] | None = None,
        start_timeout: float = 15.0,
        host_program: str | None = None,
        reply_margin_s: float = 10.0,
        write_idle_s: float = 0.5,
        write_max_wait_s: float = 5.0,
        max_restarts: int = 3,
        tools: str = "upstream",
    ):
        for name, value, low in (
            ("block_timeout", block_timeout, 0.05),
            ("max_block_timeout", max_block_timeout, 0.05),
            ("lifetime_s", lifetime_s, 1.0),
            ("start_timeout", start_timeout, 0.5),
            ("reply_margin_s", reply_margin_s, 0.5),
            ("write_idle_s", write_idle_s, 0.01),
            ("write_max_wait_s", write_max_wait_s, 0.05),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
                raise ValueError(f"ShellSessions: {name} must be a number >= {low}, got {value!r}")
        for name, value, low in (
            ("max_output_chars", max_output_chars, 64),
            ("max_sessions", max_sessions, 1),
            ("max_file_bytes", max_file_bytes, 1),
            ("width", width, 20),
            ("height", height, 5),
            ("max_restarts", max_restarts, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"ShellSessions: {name} must be an int >= {low}, got {value!r}")
        if sandbox.isolation == "rlimits" and sandbox.uid is None:
            # without a uid of its own nothing can find the tmux server and the shells again once the host is gone
            # (they leave its process group): they would outlive the sandbox
            raise SandboxUnavailable("ShellSessions needs a sandbox uid (isolation='bwrap', or 'rlimits' as root): "
                                     "in rlimits mode without one the tmux server and its shells could not be stopped")
        if tools not in TOOL_PROFILES:
            raise ValueError(f"ShellSessions: tools must be one of {', '.join(TOOL_PROFILES)}, got {tools!r}")
        self.tools = tools
        self.sandbox = sandbox
        self.workdir = os.path.normpath(workdir or sandbox.inner_path)
        if not os.path.isabs(self.workdir):
            raise ValueError(f"ShellSessions: workdir must be an absolute path inside the sandbox, got {workdir!r}")
        self.block_timeout = float(block_timeout)
        self.max_block_timeout = max(float(max_block_timeout), self.block_timeout)
        self.max_output_chars = max_output_chars
        self.max_sessions = max_sessions
        self.max_file_bytes = max_file_bytes
        self.width, self.height = width, height
        self.lifetime_s = float(lifetime_s)
        base = limits or sandbox.limits
        # The host, the tmux server and the sessions' shells live for the whole lifetime: their CPU limit is the
        # lifetime. A command typed in a session runs in (or under) that shell, so it has the same limit: a
        # `ulimit -t` on the shell would count the shell's own builtins and loops over the whole episode and kill the
        # session, losing its state. A runaway command is bounded by the lease (closed after the episode).
        self.limits = replace(base, timeout_s=self.lifetime_s, cpu_seconds=max(base.cpu_seconds, int(self.lifetime_s) + 1))
        self.command_cpu_seconds = base.cpu_seconds
        # the sandbox's interpreter: the project's (bwrap), the image's python3 (docker)
        self.python = python or getattr(sandbox, "python", None) or sys.executable
        self.env = dict(env or {})
        self.start_timeout = float(start_timeout)
        self.reply_margin_s = float(reply_margin_s)
        self.write_idle_s, self.write_max_wait_s = float(write_idle_s), float(write_max_wait_s)
        self.max_restarts = max_restarts
        self.host_program = host_program  # another program instead of shell_host (tests of a misbehaving host)
        self.max_run_output_bytes = sandbox.limits.max_output_bytes  # per stream of `run`
        # a reply carries at most a few outputs (each character at most 6 bytes of JSON): set the line limit so
        # that any honest reply fits
        self.max_reply_bytes = 24 * max_output_chars + 16 * width * height + 12 * self.max_run_output_bytes + (256 << 10)
        self.restarts = 0
        self._proc: SandboxProcess | None = None
        self._state_dir: str | None = None
        self._lock = asyncio.Lock()
        self._next_id = 0
        self._cancelled_from = 0  # replies with ids from here up to the current one answer cancelled requests
        self._names: dict[str, str] = {}  # session id -> tmux session name
        self._counter = 0
        self._lost_note = ""
        self._closed = False
        self._host_started = False  # a host ran before: the next start is a restart
        self._lost = ""  # the sessions the last dead host took with it
        self._ended_for_good: str | None = None

    # -- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    @property
    def sessions(self) -> list[str]:
        """The session ids in use."""
        return list(self._names)

    @property
    def host(self) -> SandboxProcess | None:
        return self._proc

    async def start(self) -> None:
        async with self._lock:
            await self._ensure_host()

    async def aclose(self) -> None:
        """Stop every session and the host; the sandbox is free (and clean) when this returns. Idempotent. A call
        still in flight is not waited for: it ends with an error."""
        if self._closed:
            return
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.alive and not self._lock.locked():
                try:  # a polite shutdown first (the host kills the tmux server and removes its files)
                    proc.stdin.write(b'{"id": -1, "op": "shutdown"}\n')
                    await asyncio.wait_for(proc.stdin.drain(), 2.0)
                    await asyncio.wait_for(asyncio.shield(proc.wait()), 2.0)
                except (TimeoutError, OSError, RuntimeError):
                    pass
        try:
            if proc is not None:
                await proc.kill()  # whatever is left: the namespace, then every process of the uid
        finally:  # also when that raised (a container that stopped under it)
            self._remove_state_dir()
            self._names.clear()

    def _remove_state_dir(self) -> None:
        if self._state_dir:
            fs_tree.remove_tree(self._state_dir)
            self._state_dir = None

    async def _ensure_host(self) -> None:
        if self._closed:
            raise ShellError("the shell sessions are closed")
        if self._proc is not None and self._proc.alive:
            return
        if self._proc is not None:  # it died between calls (its lifetime, a crash, the agent killed it)
            await self._kill_host()
        if self._ended_for_good:
            raise ShellError(self._ended_for_good)
        note = ""
        if self._host_started:
            if self.restarts >= self.max_restarts:
                self._ended_for_good = (
                    f"the shell environment died {self.restarts + 1} times; it is not restarted again"
                )
                raise ShellError(self._ended_for_good)
            self.restarts += 1
            note = f"[The shell environment was restarted; earlier sessions ({self._lost or 'none'}) and their processes are gone.]\n"
        await self._start_host()
        self._host_started = True
        self._lost_note = note

    async def _start_host(self) -> None:
        box = self.sandbox
        if box.isolation == "rlimits":
            if box.uid is not None and not reachable_by_others(self.python):
                raise SandboxUnavailable(
                    f"the interpreter {self.python} is under a directory the sandbox uid cannot enter; pass python= an "
                    "interpreter every uid can run (e.g. /usr/bin/python3), or use isolation='bwrap'"
                )
            self._state_dir = tempfile.mkdtemp(prefix="slime-shellhost-")
            if box.uid is not None:
                os.chown(self._state_dir, box.uid, box.uid)
        config = {
            "workdir": self.workdir,
            "nonce": os.urandom(8).hex(),
            "width": self.width,
            "height": self.height,
            "max_output_bytes": self.max_output_chars,
            "command_cpu_seconds": self.command_cpu_seconds,
            "state_dir": self._state_dir,
        }
        argv = [self.python, "-u", "-c", self.host_program or host_source(), json.dumps(config)]
        self._proc = await box.spawn(argv, env=self.env, limits=self.limits, stdout_limit=self.max_reply_bytes)
        self._next_id = 0
        self._cancelled_from = 0
        try:
            hello = await self._read_reply(self._proc, 0, self.start_timeout, "start")
        except ShellError as e:
            stderr = self._proc.stderr_text().strip() if self._proc is not None else ""
            await self._kill_host()
            raise ShellError(f"{e}{(': ' + stderr[-2000:]) if stderr else ''}") from None
        if hello.get("hello") != "shell-host":
            await self._kill_host()
            raise ShellError("the shell host did not introduce itself")

    async def _kill_host(self) -> None:
        """Stop the host (whatever state it is in) and forget its sessions."""
        proc, self._proc = self._proc, None
        if proc is not None:
            await proc.kill()
            if proc.timed_out:  # the end of its lifetime is final
                self._ended_for_good = f"the shell environment reached the end of its lifetime ({self.lifetime_s:.0f} s)"
        self._remove_state_dir()
        if self._names:
            self._lost = ", ".join(repr(i) for i in self._names)
        self._names.clear()

    # -- protocol

    async def _read_reply(self, proc: SandboxProcess, rid: int, timeout: float, op: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            line = await self._read_line(proc, max(0.0, deadline - time.monotonic()), op)
            try:
                reply = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ShellError(f"the shell host sent a malformed reply to {op!r} (not JSON: {e})") from None
            if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
                raise ShellError(f"the shell host sent a malformed reply to {op!r} (not a reply to request {rid})")
            late = reply.get("id")
            if isinstance(late, int) and not isinstance(late, bool) and self._cancelled_from <= late < rid:
                continue  # the answer to a request whose caller was cancelled: skip it
            if late != rid:
                raise ShellError(f"the shell host sent a malformed reply to {op!r} (not a reply to request {rid})")
            break
        self._cancelled_from = rid + 1
        if not reply["ok"]:
            error = reply.get("error")
            raise _HostRefused(error if isinstance(error, str) else "failed", op)
        return reply

    async def _read_line(self, proc: SandboxProcess, timeout: float, op: str) -> bytes:
        try:
            return await asyncio.wait_for(proc.stdout.readuntil(b"\n"), timeout)
        except TimeoutError:
            raise ShellError(f"the shell host did not answer {op!r} within {timeout:.0f} s") from None
        except asyncio.IncompleteReadError:
            try:  # its output closed: it is ending (the exit status tells more than the EOF)
                await asyncio.wait_for(proc.wait(), 3.0)
            except TimeoutError:
                pass
            why = f"exit status {proc.returncode}" if proc.returncode is not None else "its output closed"
            if proc.timed_out:
                why = f"it reached the end of its lifetime ({self.lifetime_s:.0f} s)"
            raise ShellError(
                f"the shell environment died during the call ({why}); the next call starts a fresh one, without the "
                "earlier sessions"
            ) from None
        except (asyncio.LimitOverrunError, ValueError):
            raise ShellError(f"the shell host sent a reply longer than {self.max_reply_bytes} bytes") from None

    async def _request(self, op: str, wait_s: float, /, **fields: Any) -> dict:
        """One request and its reply (the lock is held by the caller). A host that fails to answer properly is
        stopped (ShellError); a request it refuses raises _HostRefused (the host is fine)."""
        await self._ensure_host()
        proc = self._proc
        assert proc is not None
        self._next_id += 1
        rid = self._next_id
        try:
            proc.stdin.write((json.dumps({"id": rid, "op": op, **fields}) + "\n").encode())
            await asyncio.wait_for(proc.stdin.drain(), wait_s)
            return await self._read_reply(proc, rid, wait_s, op)
        except _HostRefused:
            raise
        except ShellError:
            await self._stop(proc)
            raise
        except (TimeoutError, OSError, RuntimeError) as e:
            await self._stop(proc)
            raise ShellError(f"could not send {op!r} to the shell host ({type(e).__name__}: {e})") from None

    async def _stop(self, proc: SandboxProcess) -> None:
        if self._proc is proc:
            await self._kill_host()
        else:  # already replaced or closed meanwhile
            await proc.kill()

    # -- typed reply fields (untrusted)

    @staticmethod
    def _field(reply: dict, name: str, types, default=None):
        value = reply.get(name, default)
        if value is None and default is None:
            return None
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise ShellError(f"the shell host sent a malformed reply ({name} has the wrong type)")
        if not isinstance(value, types):
            raise ShellError(f"the shell host sent a malformed reply ({name} has the wrong type)")
        return value

    def _output(self, reply: dict, started: float) -> ShellOutput:
        text = self._field(reply, "output", str, "")
        screen = self._field(reply, "screen", str)
        return ShellOutput(
            output=truncate_middle(text, self.max_output_chars),
            running=self._field(reply, "busy", bool, False),
            finished=self._field(reply, "finished", bool, False),
            exit_status=self._field(reply, "finished_status", int),
            alive=self._field(reply, "alive", bool, True),
            omitted_bytes=max(0, self._field(reply, "omitted_bytes", int, 0)),
            screen=truncate_middle(screen, self.max_output_chars) if screen is not None else None,
            elapsed_s=time.monotonic() - started,
        )

    # -- sessions

    def _name(self, session_id: str) -> str | None:
        return self._names.get(session_id)

    async def _open(self, session_id: str) -> str:
        name = self._names.get(session_id)
        if name is not None:
            return name
        if len(self._names) >= self.max_sessions:
            raise ToolArgumentError(
                f"too many sessions ({self.max_sessions}: {', '.join(map(repr, self._names))}); reuse one, or stop one "
                "with shell_kill_process"
            )
        self._counter += 1
        name = f"s{self._counter}"
        await self._request("new", self.start_timeout + self.reply_margin_s, session=name, timeout=self.start_timeout)
        self._names[session_id] = name
        return name

    def _forget_if_dead(self, session_id: str, out: ShellOutput) -> None:
        if not out.alive:
            self._names.pop(session_id, None)

    async def exec(self, session_id: str, command: str, *, block: bool = True, timeout: float | None = None) -> ShellOutput:
        """Run `command` in session `session_id` (started on first use). Blocking: until it finishes or
        `timeout` (default block_timeout, capped at max_block_timeout) passes; non-blocking: returns at once."""
        check_session_id(session_id)
        if not isinstance(command, str):
            raise ToolArgumentError(f"argument 'command' must be a string, got {type(command).__name__}")
        if not command.strip():
            raise ToolArgumentError("argument 'command' must not be empty")
        if "\0" in command:
            raise ToolArgumentError("argument 'command' must not contain NUL characters")
        if len(command.encode("utf-8", "surrogatepass")) > self.max_file_bytes:
            raise ToolArgumentError(f"argument 'command' is longer than {self.max_file_bytes} bytes")
        wait = self.block_timeout if timeout is None else min(max(float(timeout), 0.05), self.max_block_timeout)
        started = time.monotonic()
        async with self._lock:
            # a host that died since the last call is restarted before the session is looked up (a restart forgets
            # every session, so the old name would point at nothing)
            await self._ensure_host()
            earlier = ""
            for _ in range(2):
                name = await self._open(session_id)
                try:
                    reply = await self._request("exec", wait + self.reply_margin_s, session=name, command=command, block=bool(block), timeout=wait)
                except _HostRefused as e:
                    if e.message == "busy":
                        raise SessionBusy(
                            f"session {session_id!r} is still running a command. Use shell_view({session_id!r}) to see "
                            f"its output, shell_write_to_process({session_id!r}, ...) to send it input or '^C' to "
                            "interrupt it, or run this command in another session id"
                        ) from None
                    raise
                if reply.get("not_run") is not True:
                    break
                # its shell had exited since the last call: a fresh session runs the command
                self._names.pop(session_id, None)
                last = truncate_middle(self._field(reply, "output", str, "").rstrip("\n"), self.max_output_chars)
                earlier = (last + "\n" if last.strip() else "") + (
                    f"[The shell of session {session_id!r} had exited; a fresh one runs this command.]\n"
                )
            else:
                raise ShellError(f"session {session_id!r} could not be started")
            if not block:
                return ShellOutput(earlier, running=self._field(reply, "busy", bool, True), started=True, elapsed_s=time.monotonic() - started)
            out = self._output(reply, started)
            out.output = earlier + out.output
            self._forget_if_dead(session_id, out)
            return out

    async def view(self, session_id: str) -> ShellOutput:
        check_session_id(session_id)
        started = time.monotonic()
        async with self._lock:
            await self._ensure_host()
            name = self._name(session_id)
            if name is None:
                raise ToolArgumentError(f"no session {session_id!r} (shell_exec starts one)")
            out = self._output(await self._request("view", self.reply_margin_s, session=name), started)
            self._forget_if_dead(session_id, out)
            return out

    async def write_to_process(self, session_id: str, text: str) -> ShellOutput:
        """Type `text` and Enter into the command running in the session (a control key such as ``^C`` is sent as
        that key, without Enter); returns the output once it goes quiet (or its command finishes)."""
        check_session_id(session_id)
        if not isinstance(text, str):
            raise ToolArgumentError(f"argument 'command' must be a string, got {type(text).__name__}")
        if "\0" in text:
            raise ToolArgumentError("argument 'command' must not contain NUL characters")
        if len(text) > 64 << 10:
            raise ToolArgumentError("argument 'command' is longer than 65536 characters")
        started = time.monotonic()
        async with self._lock:
            await self._ensure_host()
            name = self._name(session_id)
            if name is None:
                raise ToolArgumentError(f"no session {session_id!r} (shell_exec starts one)")
            status = await self._request("list", self.reply_margin_s)
            sessions = status.get("sessions")
            state = sessions.get(name) if isinstance(sessions, dict) else None
            if isinstance(state, dict) and state.get("busy") is False and state.get("alive") is True and text.strip() not in CONTROL_INPUTS:
                raise ToolArgumentError(
                    f"no command is running in session {session_id!r} to read this input; run commands with shell_exec"
                )
            reply = await self._request(
                "write",
                self.write_max_wait_s + self.reply_margin_s,
                session=name,
                text=text,
                idle=self.write_idle_s,
                max_wait=self.write_max_wait_s,
            )
            out = self._output(reply, started)
            self._forget_if_dead(session_id, out)
            return out

    async def interrupt(self, session_id: str) -> ShellOutput:
        """Ctrl-C to the session's foreground command."""
        return await self.write_to_process(session_id, "^C")

    async def kill_session(self, session_id: str) -> ShellOutput:
        """Kill the session's shell and the processes of its terminal; the id is free again."""
        check_session_id(session_id)
        started = time.monotonic()
        async with self._lock:
            await self._ensure_host()
            name = self._name(session_id)
            if name is None:
                raise ToolArgumentError(f"no session {session_id!r}")
            try:
                reply = await self._request("kill", self.reply_margin_s + 2.0, session=name)
            finally:
                self._names.pop(session_id, None)
            return self._output(reply, started)

    async def write_file(self, file_path: str, content: str) -> str:
        """Write `content` to `file_path` (relative to the work directory or absolute inside it) from inside the
        sandbox; returns the absolute path inside the sandbox."""
        target = resolve_in_workdir(file_path, self.workdir)
        if not isinstance(content, str):
            raise ToolArgumentError(f"argument 'content' must be a string, got {type(content).__name__}")
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > self.max_file_bytes:
            raise ToolArgumentError(f"content is {size} bytes, more than the {self.max_file_bytes} bytes allowed")
        async with self._lock:
            reply = await self._request("write_file", self.reply_margin_s + size / (20 << 20), path=target, content=content)
        return self._field(reply, "path", str, target)

    async def run(self, command: str | list[str], *, timeout: float = 60.0, max_output_bytes: int | None = None) -> SandboxResult:
        """Run a command (a string: ``bash -lc``; a list: an argv) in the work directory, outside the sessions
        but in the same sandbox (it sees the sessions' processes and files, e.g. a server the agent started), and
        return its result once it ends or `timeout` passes (then it is killed). For the task's tests. Output is
        kept up to `max_output_bytes` per stream (at most the sandbox's ``limits.max_output_bytes``), head and
        tail."""
        if isinstance(command, str):
            fields: dict[str, Any] = {"command": command}
        elif isinstance(command, (list, tuple)) and command and all(isinstance(a, str) for a in command):
            fields = {"argv": list(command)}
        else:
            raise ValueError("command must be a string or a non-empty list of strings")
        limit = min(max_output_bytes or self.max_run_output_bytes, self.max_run_output_bytes)
        started = time.monotonic()
        async with self._lock:
            reply = await self._request("run", float(timeout) + self.reply_margin_s, timeout=float(timeout), max_output_bytes=limit, **fields)
        status = self._field(reply, "exit_status", int, -1)
        timed_out = self._field(reply, "timed_out", bool, False)
        stdout, stderr = self._field(reply, "stdout", str, ""), self._field(reply, "stderr", str, "")
        return SandboxResult(
            exit_code=(128 - status) if status < 0 else status,
            stdout=truncate_middle(stdout, 2 * limit),
            stderr=truncate_middle(stderr, 2 * limit),
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            signal=-status if status < 0 else None,
            isolation=self.sandbox.isolation,
            uid=self.sandbox.uid,
        )

    # -- the tools

    def tool_schemas(self, include_kill: bool = False) -> list[dict]:
        return tool_schemas(include_kill, self.tools)

    async def call_tool(self, name: str, arguments: Any = None) -> str:
        """Run one tool call and return its observation. Never raises (but on cancellation): an unknown tool,
        a bad argument and a failure come back as ``[TOOL_ERROR] ...`` text."""
        if not isinstance(name, str) or name not in TOOL_NAMES + (KILL_TOOL_NAME,):
            return f"[TOOL_ERROR] unknown tool: {name if isinstance(name, str) else _short(name)}"
        try:
            text = await self._call(name, arguments)
        except (ToolArgumentError, ShellError) as e:
            text = f"[TOOL_ERROR] {name}: {e}"
        except SandboxError as e:
            text = f"[TOOL_ERROR] {name}: {type(e).__name__}: {e}"
        except Exception as e:  # a bug here must not end the episode: it is an observation like any other
            logger.exception("shell tool %s failed", name)
            text = f"[TOOL_ERROR] {name}: {type(e).__name__}: {e}"
        note, self._lost_note = self._lost_note, ""
        return note + text

    async def _call(self, name: str, arguments: Any) -> str:
        if name == "shell_exec":
            # the lean profile's schema has no id: its calls run in LEAN_SESSION (an id, when given, still works)
            lean = self.tools == "lean"
            args = _check_arguments(name, arguments, {"id": (str, not lean), "command": (str, True), "block": (bool, False), "timeout": ((int, float), False)})
            args.setdefault("id", LEAN_SESSION)
            timeout = args.get("timeout")
            if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
                raise ToolArgumentError(f"argument 'timeout' must be a positive number of seconds, got {timeout!r}")
            block = args.get("block", True)
            sid = check_session_id(args["id"])
            out = await self.exec(sid, args["command"], block=block, timeout=timeout)
            if not block:
                return out.output + (
                    f"Started in session {sid!r}; it runs in the background. Use shell_view({sid!r}) to read its output, "
                    f"shell_write_to_process({sid!r}, '<text>') to send it a line of input, "
                    f"shell_write_to_process({sid!r}, '^C') to interrupt it."
                )
            wait = self.block_timeout if timeout is None else min(max(float(timeout), 0.05), self.max_block_timeout)
            return self._render_exec(sid, out, wait)
        if name == "shell_view":
            args = _check_arguments(name, arguments, {"id": (str, True)})
            sid = check_session_id(args["id"])
            return self._render_view(sid, await self.view(sid))
        if name == "shell_write_to_process":
            args = _check_arguments(name, arguments, {"id": (str, True), "command": (str, True)})
            sid = check_session_id(args["id"])
            out = await self.write_to_process(sid, args["command"])
            return self._render_write(sid, out)
        if name == "shell_write_content_to_file":
            args = _check_arguments(name, arguments, {"content": (str, True), "file_path": (str, True)})
            path = await self.write_file(args["file_path"], args["content"])
            size = len(args["content"].encode("utf-8", "surrogatepass"))
            return f"Wrote {size} bytes to {path}."
        args = _check_arguments(name, arguments, {"id": (str, True)})  # shell_kill_process
        sid = check_session_id(args["id"])
        out = await self.kill_session(sid)
        text = out.output.rstrip("\n")
        return (text + "\n" if text.strip() else "") + f"Session {sid!r} stopped."

    @staticmethod
    def _exited(sid: str) -> str:
        return f"[The shell of session {sid!r} exited; the session is closed. shell_exec with this id starts a fresh one.]"

    def _render_exec(self, sid: str, out: ShellOutput, wait: float) -> str:
        text = out.output.rstrip("\n")
        if not out.alive:
            return (text + "\n" if text.strip() else "") + self._exited(sid)
        if out.running:
            note = (
                f"[The command is still running after {wait:g} s; it goes on in session {sid!r}. Use shell_view({sid!r}) "
                f"for its new output, shell_write_to_process({sid!r}, ...) to send it input, or "
                f"shell_write_to_process({sid!r}, '^C') to interrupt it.]"
            )
            return (text + "\n" if text.strip() else "") + note
        if not text.strip():
            status = out.exit_status
            return "Command finished with no output." if status in (0, None) else f"Command finished with no output (exit status {status})."
        return text

    def _status_line(self, sid: str, out: ShellOutput) -> str:
        if not out.alive:
            return self._exited(sid)
        if out.finished:
            return f"[The command finished with exit status {out.exit_status}.]"
        if out.running:
            return f"[The command in session {sid!r} is still running.]"
        return ""

    def _render_view(self, sid: str, out: ShellOutput) -> str:
        text = out.output.rstrip("\n")
        status = self._status_line(sid, out)
        if not text.strip():
            if out.screen is not None:
                return "[No new output; a full-screen program shows:]\n" + out.screen.rstrip("\n")
            text = "[No new output]"
            if not status:
                status = f"[Session {sid!r} is idle: no command is running.]"
        return text + ("\n" + status if status else "")

    def _render_write(self, sid: str, out: ShellOutput) -> str:
        text = out.output.rstrip("\n")
        status = self._status_line(sid, out)
        if not text.strip():
            text = f"Input sent to session {sid!r} (no new output)."
        return text + ("\n" + status if status else "")


class _HostRefused(ShellError):
    """The host answered with ok=false: it is fine, the request was not."""

    def __init__(self, message: str, op: str):
        super().__init__(message)
        self.message = message
        self.op = op


__all__ = [
    "DEFAULT_BLOCK_TIMEOUT",
    "KILL_TOOL_SCHEMA",
    "SHELL_EXEC_SCHEMA",
    "SHELL_VIEW_SCHEMA",
    "SHELL_WRITE_CONTENT_TO_FILE_SCHEMA",
    "SHELL_WRITE_TO_PROCESS_SCHEMA",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "SessionBusy",
    "ShellError",
    "ShellOutput",
    "ShellSessions",
    "ToolArgumentError",
    "check_session_id",
    "resolve_in_workdir",
    "tool_schemas",
    "truncate_middle",
]
