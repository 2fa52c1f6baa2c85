"""One terminal task's workspace: its sandbox, its setup, and the evaluation of the episode by the task's tests.

Layout. On the host a private directory (mode 0700, removed by ``close()``) holds the sandbox's work directory
and a ``tests`` directory. Inside the sandbox (:class:`slime.agentic.sandbox.Sandbox`, bubblewrap, a per-sandbox
uid, no network) the work directory is ``/app``, the agent's working directory, and the host's ``tests``
directory is bound at ``/tests``. During the episode ``/tests`` is empty and owned by root, so the agent can
neither see the tests nor plant anything there (a write fails with "Permission denied"); it is cleared again
before every evaluation in any case.

Docker (``docker={...}``: :class:`slime.agentic.docker_sandbox.DockerSandbox` options): the sandbox is a container
of the image; ``/app`` is the image's own (created when missing, given to the sandbox user unless that is root) and
``/tests`` a root-owned directory of the container, staged with ``docker cp`` (:mod:`.tests_dir`), the report copied
back out; ``PYTHON`` is the image's ``python3``. The steps below are the same, and so is what the tests get to see of
the agent, but for what follows from a container living for the whole episode where bubblewrap gives every command
a fresh pid namespace and ``/tmp``:

* every process of the container but its own (init, idle; both root) is SIGKILLed after every command, whatever its
  uid, session, environment or state (a process whose main thread exited alone shows as a zombie while its other
  threads run: it is killed too), and again before anything is staged (setup, solution, tests); ``/tmp`` and
  ``/dev/shm`` are emptied before the tests. So nothing of the agent's runs beside the tests and their ``HOME``
  holds nothing of the agent's, as in bubblewrap.
* the image's root filesystem is the container's own: what the agent wrote where the image lets its user write
  (``/var/tmp``) is still there for the tests (the bwrap sandbox's system is read-only). With ``user="root"`` the
  agent can write everything, including ``/bin/bash`` and the tests' interpreter and pytest: nothing isolates the
  harness from a root agent, so use root only with trusted images and agents.
* a container that stopped during the episode (a root agent killed its idle process; the OOM killer) scores the
  evaluation 0 tests passed (reward -1, ``reason`` says so); a container removed under the harness, or a daemon
  that does not answer, raises SandboxError.

* ``setup()`` (done by ``create``): the task's ``setup.sh`` is staged at ``/tests/setup.sh`` and run with
  ``bash`` in ``/app`` as the sandbox uid (files it creates belong to the agent), with a timeout; then ``/tests``
  is emptied. A failing or timed-out setup raises :class:`TaskSetupError` (task, exit code, output tail).
* ``run(command)``: a command as the agent would run it, in ``/app`` (for scripted agents and tests; the shell
  tools drive the same :attr:`sandbox`).
* ``run_solution()``: the task's ``solution.sh``, staged and run like the setup.
* ``run_tests()``: after the episode, once no agent command is running any more (the sandbox runs one command
  at a time: a shell the agent's tools keep alive in it must be stopped first). ``/tests`` is cleared, filled with the task's ``tests/`` and ``run-tests.sh``
  (root-owned, read-only to the sandbox uid) and a results directory the uid may write, then ``bash
  /tests/run-tests.sh`` runs with ``/tests`` as its working directory (so an agent's ``/app/pytest.py`` or
  ``/app/conftest.py`` is never imported), ``HOME=/tmp`` (no dotfile of the agent's is read) and the timeout
  ``max_test_timeout_sec``. pytest's JUnit XML is read on the host (see :mod:`.junit`) into an
  :class:`EvalOutcome`: passed, total, reward ``2*passed/total - 1``, per-test outcomes, timed_out, the tail of
  the output. ``/tests`` is emptied again afterwards.

Environment of ``run-tests.sh`` (so the same task runs in a Docker image with python3 and pytest, where the
variables are unset or set by that harness): ``PYTHON`` (the project's interpreter, which is bound read-only
inside and has pytest; Debian's /usr/bin/python3 may not), ``TEST_DIR=/tests``, ``JUNIT_XML`` (where to write
the report), ``PYTEST_ADDOPTS`` (``-p no:cacheprovider --junitxml=$JUNIT_XML``, so a user's run-tests.sh that
calls plain pytest writes the report too), ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` (the venv's plugins cost ~0.5 s
per run; ``autoload_pytest_plugins=True`` keeps them), ``PYTHONDONTWRITEBYTECODE=1``.

Limits: the tests run as the agent's uid (as in terminal-bench, where they run in the agent's container), so a
program of the agent's that the tests execute could tamper with the report while the tests run. The tests and
run-tests.sh themselves cannot be changed by it (root-owned), and nothing the agent started earlier is still
running (both backends).

API: ``async`` first, with ``*_sync`` wrappers (the sandbox's convention)::

    ws = await TaskWorkspace.create(task)       # sandbox + setup.sh
    try:
        await ws.run("ls -la")                  # the agent's commands (or the shell tools on ws.sandbox)
        outcome = await ws.run_tests()          # outcome.reward, outcome.passed, outcome.total, ...
    finally:
        await ws.aclose()

    with TaskWorkspace.create_sync(task) as ws:
        ws.run_solution_sync(); print(ws.run_tests_sync().reward)
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import shlex
import stat as stat_mod
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slime.agentic import fs_tree
from slime.agentic.docker_sandbox import ContainerGone, DockerSandbox, SandboxUnavailable, default_docker_host
from slime.agentic.sandbox import (
    Command,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    UidPool,
    _run_coroutine,
    capped_work_directory,  # the sandbox's sync wrappers' helper: the same convention here
)

from slime.agentic import sealed_report  # a module, not its names: sealed_report imports .junit of this package

from . import offline_kit
from .compose import ComposeError, ComposeProject, ServiceGroup, load_compose
from .dockerfile import NeedsDocker, build_script, sandbox_build
from .junit import JUnitReport, pass_rate_reward
from .tasks import HARBOR, TerminalTask, load_task
from .tests_dir import ContainerTestsDir, HostTestsDir

logger = logging.getLogger(__name__)

APP_DIR = "/app"
TESTS_MOUNT = "/tests"
HARBOR_SOLUTION_DIR = "/solution"  # where Harbor puts a task's solution/ folder for its oracle
HARBOR_VERIFIER_LOGS = "/logs/verifier"  # Harbor's verifier writes reward.txt (and a CTRF report) here
DEFAULT_SETUP_TIMEOUT_S = 120.0
DEFAULT_SOLUTION_TIMEOUT_S = 120.0
OUTPUT_TAIL_CHARS = 4000
HARNESS_SUBDIR = ".slime"  # /tests/.slime: the sealed-report plugin (root-owned, on the tests' PYTHONPATH)
JUNIT_XML = "/tmp/slime-junit.xml"  # where a run-tests.sh's --junitxml goes; nobody reads it back
_GIT_NEUTRAL = {"GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": "/dev/null",
                "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false",
                "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat", "GIT_TERMINAL_PROMPT": "0"}
# task content -> the test ids collected in a fresh workspace before any episode (sealed_report: expected ids); also
# kept on disk (root's cache: nothing of a sandbox can write it), so a task's listing is made once per machine
_EXPECTED_TESTS: dict[str, tuple[str, ...]] = {}
EXPECTED_CACHE_ENV = "SLIME_TERMINAL_EXPECTED_CACHE"


def expected_cache_dir() -> Path:
    return Path(os.environ.get(EXPECTED_CACHE_ENV) or Path.home() / ".cache" / "slime" / "terminal-expected")


def _cached_expected(key: str) -> tuple[str, ...] | None:
    path = expected_cache_dir() / f"{key}.json"
    try:
        st = os.lstat(path)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        ids = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return tuple(ids) if isinstance(ids, list) and ids and all(isinstance(i, str) for i in ids) else None


def _store_expected(key: str, ids: tuple[str, ...]) -> None:
    directory = expected_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(list(ids)))
        os.replace(tmp, directory / f"{key}.json")
    except OSError as e:  # a read-only home: the listing is made again next time
        logger.debug("terminal: cannot cache the expected tests: %s", e)


class TaskSetupError(RuntimeError):
    """setup.sh failed or timed out; the message names the task and holds the output's tail."""

    def __init__(self, message: str, result: SandboxResult | None = None):
        super().__init__(message)
        self.result = result


def keeps_agent_processes(docker_user: str | None) -> bool:
    """Whether an agent that runs as `docker_user` may keep its processes alive during the tests, as Terminal-Bench
    keeps them: root only. A root agent can change anything the tests use in its container anyway; an unprivileged
    agent's process could ptrace the tests' pytest (same uid, no Yama here), which killing it before the tests
    prevents."""
    return docker_user in ("root", "0", "0:0")


class NeedsDockerBackend(TaskSetupError):
    """The task's Dockerfile does what the bubblewrap sandbox cannot (installs packages, another working directory,
    services...): run it with the Docker backend. The message says why."""


@dataclass(frozen=True)
class EvalOutcome:
    """The result of running a task's tests after an episode."""

    task: str
    report: JUnitReport
    timed_out: bool = False
    exit_code: int | None = None
    output_tail: str = ""
    duration_s: float = 0.0
    reason: str = ""  # why there is no usable report (empty when the tests ran and were read)
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed/failed/error/skipped
    tampered: bool = False  # the sealed report shows tampering (reason says how): reward -1

    @property
    def passed(self) -> int:
        return self.report.passed

    @property
    def total(self) -> int:
        return self.report.total

    @property
    def accuracy(self) -> float:
        return self.report.accuracy

    @property
    def reward(self) -> float:
        return pass_rate_reward(self.passed, self.total)

    @property
    def success(self) -> bool:
        return self.report.all_passed

    def as_dict(self) -> dict:
        return {
            "task": self.task, "passed": self.passed, "total": self.total, "failed": self.report.failed,
            "errors": self.report.errors, "skipped": self.report.skipped, "accuracy": self.accuracy,
            "reward": self.reward, "success": self.success, "timed_out": self.timed_out, "exit_code": self.exit_code,
            "duration_s": round(self.duration_s, 3), "reason": self.reason, "outcomes": dict(self.outcomes),
            "tampered": self.tampered,
        }


def _tail(result: SandboxResult, limit: int = OUTPUT_TAIL_CHARS) -> str:
    text = result.stdout
    if result.stderr:
        text = f"{text}\n[stderr]\n{result.stderr}" if text else result.stderr
    return text[-limit:]


class TaskWorkspace:
    """A task's sandbox with /app and the hidden /tests; see the module docstring. Construction is synchronous
    (directories and a uid; a container with `docker`); ``setup()`` runs setup.sh. One command at a time (the
    sandbox's rule).

    `docker`: None for the bubblewrap sandbox; else the keyword arguments of
    :class:`~slime.agentic.docker_sandbox.DockerSandbox` (``image``, ``user``, ``docker_host``, ``labels``, ...)
    and the task runs in a container of that image (its /app as the image has it, its own python3 and pytest)."""

    def __init__(
        self,
        task: TerminalTask | str | os.PathLike,
        *,
        limits: SandboxLimits | None = None,
        base_dir: str | os.PathLike | None = None,
        uid_pool: UidPool | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        setup_timeout_s: float = DEFAULT_SETUP_TIMEOUT_S,
        autoload_pytest_plugins: bool = False,
        docker: Mapping[str, Any] | None = None,
        keep_agent_processes: bool = False,
        services: Sequence[tuple[str, str]] | None = None,
    ):
        self.task = task if isinstance(task, TerminalTask) else load_task(task)
        self.setup_timeout_s = float(setup_timeout_s)
        self._box_options = {"limits": limits, "uid_pool": uid_pool, "env": env}  # for snapshot evaluations
        self.autoload_pytest_plugins = autoload_pytest_plugins
        if keep_agent_processes and docker is None:
            raise ValueError("keep_agent_processes needs the Docker backend (a bubblewrap command's processes end "
                             "with its pid namespace)")
        if keep_agent_processes and not keeps_agent_processes(docker.get("user")):
            raise ValueError("keep_agent_processes is for a root agent only (an unprivileged agent's process could "
                             "ptrace the tests' pytest, which runs as the same uid)")
        # Terminal-Bench's semantics: what the agent (or the solution) started still runs while the tests do
        self.keep_agent_processes = bool(keep_agent_processes)
        self._kept_shell = None  # keep mode: the shell session the solution ran in, open until the tests end
        self.setup_s: float | None = None  # measured: setup.sh's wall time
        self.last_eval_s: float | None = None  # measured: the last run_tests' wall time (staging, pytest, parsing)
        self._closed = True
        self.services: ServiceGroup | None = None  # the task's compose services beside the agent's container
        base = os.fspath(base_dir) if base_dir is not None else tempfile.gettempdir()
        self.root = Path(tempfile.mkdtemp(prefix=f"slime-terminal-{self.task.name[:40]}-", dir=base))
        try:
            os.chmod(self.root, 0o700)
            self.sandbox: Sandbox | DockerSandbox
            self.tests_host: Path | None = None  # bwrap: /tests on the host
            if docker is None:
                self.tests_host = self.root / "tests"
                self.tests_host.mkdir(mode=0o755)
                os.chmod(self.tests_host, 0o755)  # root-owned: the sandbox uid may enter it but not write into it
                self.sandbox = Sandbox(
                    limits=limits,
                    base_dir=self.root,
                    mount_at=APP_DIR,
                    rw_binds=[(str(self.tests_host), TESTS_MOUNT)],
                    uid_pool=uid_pool,
                    env=env,
                )
                self.tests: HostTestsDir | ContainerTestsDir = HostTestsDir(self.tests_host, self.sandbox.uid)
            else:
                options = {"workdir": APP_DIR, "limits": limits, "env": env, "uid_pool": uid_pool, **docker}
                options["root_dirs"] = (*options.get("root_dirs", ()), TESTS_MOUNT)
                project = self._compose_project()
                if project is not None:  # what the compose file sets for the agent's container, under the caller's
                    options["env"] = {**project.agent_environment, **(options.get("env") or {})}
                if project is not None and project.services:
                    self.services = self._start_services(project, services, options, limits)
                    options["network"] = self.services.network
                self.sandbox = DockerSandbox(**options)
                self.tests = ContainerTestsDir(self.sandbox, TESTS_MOUNT)
        except BaseException:
            if self.services is not None:
                self.services.close()
            fs_tree.remove_tree(self.root)
            raise
        # the interpreter of $PYTHON for the staged scripts and the tests: the project's (bound read-only into the
        # bwrap sandbox), or the image's python3
        self.python = python or self.sandbox.python
        self._closed = False

    def _compose_project(self) -> ComposeProject | None:
        try:
            return load_compose(self.task)
        except ComposeError as exc:
            raise TaskSetupError(str(exc)) from None

    def _start_services(self, project: ComposeProject, services: Sequence[tuple[str, str]] | None,
                        options: Mapping[str, Any], limits: SandboxLimits | None) -> ServiceGroup:
        """The task's compose services on a private network the agent's container then joins; their images come
        from the caller (task_images.build_service_images, done with the task's own image)."""
        if services is None:
            names = ", ".join(s.name for s in project.services)
            raise TaskSetupError(f"task {self.task.name!r}: its compose file runs {names} beside the agent's "
                                 "container: build the task's images (check --build, the provider's "
                                 "build_images) so they run")
        try:
            host = options.get("docker_host") or default_docker_host()
            return ServiceGroup(project, dict(services), docker_host=host, labels=options.get("labels"), limits=limits)
        except SandboxUnavailable:
            raise
        except SandboxError as exc:  # a service that exits or never gets healthy: the task's setup failed
            raise TaskSetupError(f"task {self.task.name!r}: its services did not start: {exc}") from None

    # -- lifecycle

    @classmethod
    async def create(cls, task: TerminalTask | str | os.PathLike, **kwargs) -> TaskWorkspace:
        """A workspace with setup.sh done; closed again if the setup fails."""
        ws = await asyncio.to_thread(cls, task, **kwargs)
        try:
            await ws.setup()
        except BaseException:
            await ws.aclose()
            raise
        return ws

    @classmethod
    def create_sync(cls, task: TerminalTask | str | os.PathLike, **kwargs) -> TaskWorkspace:
        return _run_coroutine(cls.create(task, **kwargs))

    @property
    def app_host(self) -> Path | None:
        """/app on the host (for inspection; files in it belong to the sandbox uid); None in a container."""
        return Path(self.sandbox.path) if self.sandbox.path else None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the sandbox and remove every directory of the workspace. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.sandbox.close()  # the kept shell's host dies with the container
        finally:
            self._kept_shell = None
            if self.services is not None:  # after the agent's container: the network is free by then
                self.services.close()
            fs_tree.remove_tree(self.root)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> TaskWorkspace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> TaskWorkspace:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception as e:  # interpreter shutdown: modules may be gone
                logger.debug("terminal workspace: close() from __del__ failed: %s", e)

    # -- the hidden /tests directory

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError(f"the workspace of task {self.task.name!r} is closed")

    def _clear_tests(self) -> None:
        self.tests.clear(kill=not self.keep_agent_processes)

    async def _run_staged(self, script: Path, name: str, timeout: float, env: Mapping[str, str] | None = None) -> SandboxResult:
        await self.sandbox._settle()  # a cleanup a cancelled command left running ends first
        self.sandbox._check_free()  # nothing of the agent's may be running while /tests holds anything
        await asyncio.to_thread(self.tests.stage, {name: script})
        try:
            return await self.sandbox.run(["bash", f"{TESTS_MOUNT}/{name}"], timeout=timeout, env={"PYTHON": self.python, **(env or {})})
        finally:
            await asyncio.to_thread(self._clear_tests)

    async def _run_in_kept_shell(self, script: Path, timeout: float, env: Mapping[str, str] | None) -> SandboxResult:
        """Keep mode: the solution typed into a shell session as an agent would (`bash FILE`), the session left open
        so that what it started (a server in the background) still runs during the tests. The script goes to a
        root-owned folder outside /tests (it may outlive the staging): a Harbor task's whole `solution/` folder at
        `/solution`, where Harbor puts it (its solve.sh reads its other files from there); else
        `/opt/slime-solution/`."""
        from slime.agentic.shell_sessions import ShellSessions

        harbor = self.task.format == HARBOR
        folder = ContainerTestsDir(self.sandbox, HARBOR_SOLUTION_DIR if harbor else "/opt/slime-solution")
        await asyncio.to_thread(folder.stage, {} if harbor else {script.name: script},
                                {".": script.parent} if harbor else None, kill=False)
        staged = f"{folder.mount}/{script.name}"
        self._kept_shell = self._kept_shell or ShellSessions(self.sandbox, max_block_timeout=max(timeout, 1.0))
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in {"PYTHON": self.python, **(env or {})}.items())
        start = time.monotonic()
        out = await self._kept_shell.exec("solution", f"({exports}bash {staged})", block=True, timeout=timeout)
        elapsed = time.monotonic() - start
        timed_out = not out.finished
        code = 124 if timed_out else (out.exit_status if out.exit_status is not None else 1)
        return SandboxResult(exit_code=code, stdout=out.output[-20000:], stderr="", timed_out=timed_out,
                             duration_s=elapsed, isolation=self.sandbox.isolation)

    # -- setup, agent commands, solution

    async def setup(self) -> SandboxResult | None:
        """Prepare /app (once, before the episode): the task's setup.sh, or, in the bubblewrap sandbox, what its
        Dockerfile does when the sandbox can do the same (`.dockerfile.sandbox_build`: its COPYs and RUNs as the
        sandbox uid). Raises TaskSetupError when it fails, NeedsDockerBackend when only Docker can build it."""
        self._check_open()
        start = time.monotonic()
        if self.task.setup_script is not None:
            result, what = await self._run_staged(self.task.setup_script, "setup.sh", self.setup_timeout_s), "setup.sh"
        elif self.task.dockerfile is not None and self.app_host is not None:
            result, what = await self._build_from_dockerfile(), "the Dockerfile's steps"
        else:
            result = None
        self.setup_s = time.monotonic() - start
        if result is not None and not result.ok:
            how = f"timed out after {self.setup_timeout_s:g} s" if result.timed_out else f"exited with {result.exit_code}"
            raise TaskSetupError(f"task {self.task.name!r}: {what} {how}:\n{_tail(result, 2000)}", result)
        await self.expected_tests()
        return result

    async def _build_from_dockerfile(self) -> SandboxResult:
        """The task's Dockerfile done in the sandbox: its build context's files staged (root-owned, read-only) under
        /tests/context, copied and run from a generated script as the agent's uid, then /tests emptied again."""
        try:
            build = sandbox_build(self.task.dockerfile, self.task.environment_dir or self.task.path,
                                  self.task.compose_file)
        except NeedsDocker as exc:
            raise NeedsDockerBackend(f"task {self.task.name!r}: {exc}") from None
        script = self.root / "dockerfile-build.sh"
        script.write_text(build_script(build, f"{TESTS_MOUNT}/context"))
        files = {"build.sh": script}
        dirs = {}
        for i, (source, _) in enumerate(build.copies):
            (dirs if Path(source).is_dir() else files)[f"context/{i}"] = Path(source)
        await self.sandbox._settle()
        self.sandbox._check_free()
        await asyncio.to_thread(self.tests.stage, files, dirs)
        try:
            return await self.sandbox.run(["bash", f"{TESTS_MOUNT}/build.sh"], timeout=self.setup_timeout_s,
                                          env={"PYTHON": self.python})
        finally:
            await asyncio.to_thread(self._clear_tests)

    async def run(self, command: Command, **kwargs) -> SandboxResult:
        """A command in /app as the agent (a string runs as ``bash -lc``); Sandbox.run's keyword arguments."""
        self._check_open()
        return await self.sandbox.run(command, **kwargs)

    async def run_solution(self, timeout: float = DEFAULT_SOLUTION_TIMEOUT_S) -> SandboxResult:
        """Run the task's solution.sh in /app (a scripted agent), or type its solution.yaml into a shell."""
        self._check_open()
        if self.task.solution_script is None and self.task.solution_commands:
            return await self._type_solution(timeout)
        if self.task.solution_script is None:
            raise FileNotFoundError(f"task {self.task.name!r} has no solution.sh")
        if self.keep_agent_processes:
            return await self._run_in_kept_shell(self.task.solution_script, timeout, self.task.solution_env or None)
        return await self._run_staged(self.task.solution_script, "solution.sh", timeout,
                                      env=self.task.solution_env or None)

    async def _type_solution(self, timeout: float) -> SandboxResult:
        """Terminal-Bench 1.x's solution.yaml: each command typed into one tmux shell session as the agent's tools
        would (`block`: wait for it to finish; otherwise it keeps running and the next entry may be its input),
        then at least `min_timeout_sec`. The session is closed afterwards: what it started ends before the tests,
        as the agent's does. Exit status 0 unless the whole took longer than `timeout` (124)."""
        from slime.agentic.shell_sessions import ShellSessions

        start, outputs, running = time.monotonic(), [], False
        shell = ShellSessions(self.sandbox, max_block_timeout=max(timeout, 1.0))
        if self.keep_agent_processes:  # the session stays open until the tests end (what it started runs on)
            self._kept_shell = shell
        try:
            for step in self.task.solution_commands:
                left = timeout - (time.monotonic() - start)
                if left <= 0:
                    break
                if running:  # input for the program an earlier entry started
                    out = await shell.write_to_process("solution", step.command)
                else:
                    out = await shell.exec("solution", step.command, block=step.block, timeout=left)
                running = out.running or (out.started and not out.finished)
                outputs.append(out.output)
                if step.min_timeout_sec:
                    await asyncio.sleep(min(step.min_timeout_sec, max(left, 0.0)))
        finally:
            if not self.keep_agent_processes:
                await shell.aclose()
        elapsed = time.monotonic() - start
        timed_out = elapsed >= timeout
        return SandboxResult(exit_code=124 if timed_out else 0, stdout="".join(outputs)[-20000:], stderr="",
                             timed_out=timed_out, duration_s=elapsed,
                             isolation=getattr(self.sandbox, "isolation", "bwrap"))

    # -- evaluation

    def _test_env(self) -> dict[str, str]:
        env = {
            "PYTHON": self.python,
            "TEST_DIR": TESTS_MOUNT,
            "JUNIT_XML": JUNIT_XML,
            # the sealed-report plugin first, before any conftest or test module is imported
            "PYTEST_ADDOPTS": f"-p {sealed_report.PLUGIN_MODULE} -p no:cacheprovider --junitxml={JUNIT_XML}",
            "PYTHONPATH": f"{TESTS_MOUNT}/{HARNESS_SUBDIR}",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "HOME": "/tmp",
            # git run by the tests in the agent's repository runs none of its hooks, fsmonitor or pager (config
            # given this way outranks the repository's own)
            **_GIT_NEUTRAL,
        }
        if not self.autoload_pytest_plugins:
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        if getattr(self.sandbox, "image", None):
            # a task image's offline test runners (offline_kit): the tests' environment is built here, not inherited
            # from the image, so uv is told again to stay offline and where its wheels are
            env.update(offline_kit.ENV)
        return env

    def _staged_test_files(self) -> dict[str, Path]:
        return {"run-tests.sh": self.task.run_tests_script,
                f"{HARNESS_SUBDIR}/{sealed_report.PLUGIN_FILE}": sealed_report.plugin_source()}

    def _tests_folders(self) -> dict[str, Path]:
        """The task's tests/ folder staged as /tests itself (none when the tests live in run-tests.sh alone)."""
        return {".": self.task.tests_dir} if self.task.tests_dir is not None else {}

    @functools.cached_property
    def _content_key(self) -> str:
        """What the expected test ids depend on: the task's tests, run-tests.sh and setup.sh, and the backend (read
        once per workspace: setup, every evaluation and every state evaluation ask)."""
        digest = hashlib.sha256()
        backend = getattr(self.sandbox, "image", None) or self.sandbox.isolation
        digest.update(f"{backend}\0{self.python}\0".encode())
        paths = [self.task.run_tests_script, self.task.setup_script]
        base = self.task.tests_dir or self.task.path
        if self.task.tests_dir is not None:
            paths += sorted(p for p in Path(base).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for path in paths:
            if path is not None:
                digest.update(os.fsencode(os.path.relpath(path, base)) + b"\0" + Path(path).read_bytes() + b"\0")
        return digest.hexdigest()

    async def _sealed_tests(self, spec: sealed_report.ReportSpec, timeout: float) -> sealed_report.SealedRun:
        """run-tests.sh with the report channel (sealed_report.run_sealed); /tests staged before, emptied after. In
        keep mode the tests run beside whatever the agent or the solution left running (their shells included), and
        every process of the container ends with them."""
        keep = self.keep_agent_processes
        if not keep:
            await self.sandbox._settle()  # a cleanup a cancelled command left running ends first
            self.sandbox._check_free()  # the agent's shells must have ended (see the module docstring)
        # scratch places are emptied only where nothing of the agent's runs on (a server's socket may be in /tmp)
        await asyncio.to_thread(self.tests.stage, self._staged_test_files(), self._tests_folders(),
                                scratch=not keep, kill=not keep)
        if self.sandbox.isolation == "docker":
            # Harbor starts every verifier with an empty /logs/verifier: nothing planted there (a reward.txt, a
            # file that moves pytest's rootdir, as a report an earlier run left at `--ctrf`'s path does) counts.
            # Done for every format: a TB 1.x run-tests.sh may write its report there too, and the listing of the
            # tests before the episode (a run of ours in the same container) left one, which moved the real run's
            # rootdir to / (every test id "tests/..."; seen only on a machine without the listing cached)
            await asyncio.to_thread(self.sandbox.root_exec, 'rm -rf "$1" && mkdir -m 0777 -p "$1"',
                                    HARBOR_VERIFIER_LOGS)
        try:
            # the wall-clock limit is the task's; the per-process CPU limit must not cut a long test run shorter
            return await sealed_report.run_sealed(self.sandbox, ["bash", f"{TESTS_MOUNT}/run-tests.sh"], spec=spec,
                                                  env=self._test_env(), cwd=TESTS_MOUNT,
                                                  limits=self.sandbox.limits.with_timeout(timeout), alongside=keep)
        finally:
            if keep:  # the run ended every process of the container: the kept shell's host too
                shell, self._kept_shell = self._kept_shell, None
                if shell is not None:
                    await shell.aclose()
            await asyncio.to_thread(self._clear_tests)

    async def expected_tests(self) -> tuple[str, ...]:
        """The test ids of the task as collected in a fresh workspace before the episode (nothing of the agent's has run
        yet), once per task content and backend (kept in this process and in root's cache directory,
        ``~/.cache/slime/terminal-expected``). Raises TaskSetupError when they cannot be collected."""
        key = self._content_key
        if key not in _EXPECTED_TESTS and (cached := _cached_expected(key)) is not None:
            _EXPECTED_TESTS[key] = cached
        if key not in _EXPECTED_TESTS:
            spec = sealed_report.ReportSpec.new("collect")
            run = await self._sealed_tests(spec, float(self.task.max_test_timeout_sec))
            ids, problem = sealed_report.collected_ids(run.report, spec, exit_code=run.exit_code)
            if problem:
                raise TaskSetupError(f"task {self.task.name!r}: cannot list its tests before the episode: {problem}"
                                     f"\n{run.output[-2000:]}")
            _EXPECTED_TESTS[key] = ids
            await asyncio.to_thread(_store_expected, key, ids)
        return _EXPECTED_TESTS[key]

    async def run_tests(self, timeout: float | None = None) -> EvalOutcome:
        """Run the task's tests in the sandbox and judge their sealed report (see the module docstring)."""
        self._check_open()
        expected = await self.expected_tests()
        timeout = float(timeout if timeout is not None else self.task.max_test_timeout_sec)
        start = time.monotonic()
        spec = sealed_report.ReportSpec.new("run")
        try:
            run = await self._sealed_tests(spec, timeout)
        except ContainerGone as e:
            # the episode stopped its container (a root agent killed its idle process; the OOM killer): no test
            # can pass, the sample is scored; a container removed under us, or a daemon that does not answer, raise
            if not self.sandbox.stopped_in_episode(e):
                raise
            self.last_eval_s = time.monotonic() - start
            reason = f"the container stopped during the episode, no test could run ({e})"
            return EvalOutcome(task=self.task.name, report=JUnitReport((), reason), timed_out=False, exit_code=None,
                               output_tail="", duration_s=self.last_eval_s, reason=reason, outcomes={})
        self.last_eval_s = time.monotonic() - start
        outcome = self._judged(run, spec, expected, timeout, self.last_eval_s)
        if outcome.tampered:
            logger.warning("terminal task %s: the evaluation was tampered with: %s", self.task.name, outcome.reason)
        return outcome

    def _judged(self, run: sealed_report.SealedRun, spec: sealed_report.ReportSpec, expected: tuple[str, ...],
                timeout: float, duration_s: float) -> EvalOutcome:
        """The verdict on a sealed run (sealed_report.judge) as an EvalOutcome."""
        # a Terminal-Bench 1.x run-tests.sh ends with pytest, so its status must agree with the report; a Harbor
        # verifier turns pytest's status into reward.txt and exits 0 whatever happened: its status says nothing
        status = None if self.task.format == HARBOR else run.exit_code
        verdict = sealed_report.judge(run.report, spec, expected=expected, exit_code=status,
                                      timed_out=run.timed_out, overflow=run.overflow)
        reason = f"the tests timed out after {timeout:g} s" if run.timed_out else verdict.reason
        report = verdict.junit()
        return EvalOutcome(task=self.task.name, report=report, timed_out=run.timed_out, exit_code=run.exit_code,
                           output_tail=run.output[-OUTPUT_TAIL_CHARS:], duration_s=duration_s, reason=reason,
                           outcomes=report.outcomes(), tampered=verdict.tampered)

    # -- the state during the episode (the rule step judge's host-observed facts)

    async def state_fingerprint(self) -> str:
        """A digest of /app's entries (path, type, size, mode, mtime, link target), read by the host (``find`` as
        root: on the host directory, or in the container) while the episode goes on. Content edits that keep size
        and mtime are not seen: only the agent can make one, and it only hides its own progress."""
        self._check_open()
        listing = r"%P\0%y\0%s\0%m\0%T@\0%l\0"  # find's own escapes: NUL-separated fields
        if self.app_host is not None:
            proc = await asyncio.to_thread(subprocess.run, ["find", str(self.app_host), "-xdev", "-mindepth", "1",
                                                            "-printf", listing], capture_output=True, timeout=60)
            data = proc.stdout
        else:
            data = await asyncio.to_thread(self.sandbox.root_exec, 'find "$1" -xdev -mindepth 1 -printf "$2"',
                                           APP_DIR, listing)
        return hashlib.sha256(data).hexdigest()

    async def evaluate_state(self, timeout: float | None = None) -> EvalOutcome | None:
        """The task's tests on a copy of /app as it is now, in a sandbox of its own (a fresh uid, a fresh /tests),
        while the episode's sandbox and its shells live on: the rule step judge's measure of progress. Sealed like
        :meth:`run_tests`. None on the Docker backend (no snapshot of a container is taken)."""
        self._check_open()
        if self.app_host is None:
            return None
        expected = await self.expected_tests()
        timeout = float(timeout if timeout is not None else self.task.max_test_timeout_sec)
        scratch = Path(tempfile.mkdtemp(prefix="state-", dir=self.root))
        disk = None
        try:
            app, tests_host = scratch / "app", scratch / "tests"
            # a filesystem of its own with the disk budget (the tests may write), then the copy into it
            disk = await asyncio.to_thread(capped_work_directory, app, self.sandbox.limits)
            copied = await asyncio.to_thread(subprocess.run, ["cp", "-a", "--", f"{self.app_host}/.", str(app)],
                                             capture_output=True, timeout=120)
            if copied.returncode != 0:
                logger.warning("terminal task %s: cannot copy /app for a state evaluation: %s", self.task.name,
                               copied.stderr.decode(errors="replace")[-300:])
                return None
            tests_host.mkdir(mode=0o755)
            box = await asyncio.to_thread(Sandbox, str(app), mount_at=APP_DIR,
                                          rw_binds=[(str(tests_host), TESTS_MOUNT)], **self._box_options)
            try:
                tests = HostTestsDir(tests_host, box.uid)
                await asyncio.to_thread(tests.stage, self._staged_test_files(), self._tests_folders())
                spec = sealed_report.ReportSpec.new("run")
                run = await sealed_report.run_sealed(box, ["bash", f"{TESTS_MOUNT}/run-tests.sh"], spec=spec,
                                                     env=self._test_env(), cwd=TESTS_MOUNT,
                                                     limits=box.limits.with_timeout(timeout))
            finally:
                await asyncio.to_thread(box.close)
        finally:
            if disk is not None:
                await asyncio.to_thread(disk.close)
            await asyncio.to_thread(fs_tree.remove_tree, scratch)
        return self._judged(run, spec, expected, timeout, run.duration_s)

    # -- sync wrappers

    def setup_sync(self) -> SandboxResult | None:
        return _run_coroutine(self.setup())

    def run_sync(self, command: Command, **kwargs) -> SandboxResult:
        return _run_coroutine(self.run(command, **kwargs))

    def run_solution_sync(self, timeout: float = DEFAULT_SOLUTION_TIMEOUT_S) -> SandboxResult:
        return _run_coroutine(self.run_solution(timeout))

    def run_tests_sync(self, timeout: float | None = None) -> EvalOutcome:
        return _run_coroutine(self.run_tests(timeout))


async def evaluate_solution(task: TerminalTask | str | os.PathLike, *, solve: bool = True, **kwargs) -> tuple[EvalOutcome, dict]:
    """A fresh workspace, then solution.sh (``solve=True``) or nothing, then the tests; the workspace is removed.
    Returns the outcome and the measured times in seconds: setup_s, solution_s, tests_s, total_s."""
    start = time.monotonic()
    ws = await TaskWorkspace.create(task, **kwargs)
    try:
        solution_s = 0.0
        if solve:
            t = time.monotonic()
            result = await ws.run_solution()
            solution_s = time.monotonic() - t
            if not result.ok:
                what = "timed out" if result.timed_out else f"exited with {result.exit_code}"
                raise RuntimeError(f"task {ws.task.name!r}: solution.sh {what}:\n{_tail(result, 2000)}")
        outcome = await ws.run_tests()
        times = {"setup_s": ws.setup_s or 0.0, "solution_s": solution_s, "tests_s": ws.last_eval_s or 0.0}
    finally:
        await ws.aclose()
    times["total_s"] = time.monotonic() - start
    return outcome, times


__all__ = [
    "APP_DIR",
    "TESTS_MOUNT",
    "EvalOutcome",
    "TaskSetupError",
    "TaskWorkspace",
    "evaluate_solution",
]
