"""Start an engine server as a child process on a free loopback port, wait until it serves, stop it by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path



def _die_with_parent():
    """In the child, before exec: ask Linux to SIGTERM us when the parent dies.

    The engine runs in its own session (so a terminal's Ctrl-C reaches the trainer, which then stops it
    cleanly); this covers the other cases, a killed or crashed parent, so no engine is ever orphaned.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# torchrun's rendezvous variables: a child server is never a rank of its parent's process group, and one that
# inherited them (e.g. from a trainer rank) would try to join that group or bind its store's port.
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                      "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID")


def inherited_environment() -> dict:
    """This process's environment for a child server, without torchrun's rendezvous variables."""
    return {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # started with start_new_session: its pid is its group id
    except ProcessLookupError:
        pass


class ChildServer:
    """A server started as a child process on a free loopback port, stopped by PID.

    The child gets its own process group (a terminal's Ctrl-C reaches only the parent, which then stops
    it cleanly) and dies with its parent otherwise. Subclasses say which command to run and which path
    answers once it serves.
    """

    ready_path = "/health"
    name = "server"
    cwd: str | None = None  # working directory of the child (None: ours)

    def __init__(self, *, port: int | None = None, api_key: str | None = None,
                 log_path: str | Path | None = None, ready_timeout: float = 300.0, threads: int = 1,
                 host: str = "127.0.0.1"):
        self.host = host
        self.port = port or free_port(self.host)
        self.api_key = api_key
        self.log_path = Path(log_path) if log_path else None
        self.ready_timeout = ready_timeout
        self.threads = threads
        self.process: subprocess.Popen | None = None
        self._log_file = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict:
        return {**inherited_environment(), "OMP_NUM_THREADS": str(self.threads), "TOKENIZERS_PARALLELISM": "false",
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    def start(self):
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
        out = self._log_file or None  # None: inherit our stderr/stdout, so conversion progress is visible
        self.process = subprocess.Popen(self.command(), env=self.environment(), stdout=out, cwd=self.cwd,
                                        stderr=subprocess.STDOUT if out else None,
                                        start_new_session=True, preexec_fn=_die_with_parent)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self):
        import httpx

        deadline = time.monotonic() + self.ready_timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        with httpx.Client(timeout=5.0, headers=headers) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.process.returncode} before serving"
                                       + (f"; see {self.log_path}" if self.log_path else ""))
                try:
                    if client.get(self.url + self.ready_path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.3)
        raise TimeoutError(f"{self.name} at {self.url} not ready after {self.ready_timeout:.0f} s")

    stop_signal = signal.SIGTERM
    stop_grace = 10.0

    def stop(self, grace: float | None = None):
        """Signal the child's own process group (it and anything it started), escalate to SIGKILL."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            _signal_group(proc, self.stop_signal)
            try:
                proc.wait(timeout=self.stop_grace if grace is None else grace)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        if self._log_file:
            self._log_file.close()
            self._log_file = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class EngineProcess(ChildServer):
    """`with EngineProcess("tiny") as engine: EngineClient(engine.url)...`"""

    name = "engine"

    def __init__(self, model_path: str | Path = "smollm2", *extra_args: str, port: int | None = None,
                 api_key: str | None = None, log_path: str | Path | None = None, ready_timeout: float = 300.0,
                 threads: int = 1, host: str = "127.0.0.1"):
        super().__init__(port=port, api_key=api_key, log_path=log_path, ready_timeout=ready_timeout, threads=threads,
                         host=host)
        self.model_path = str(model_path)
        self.extra_args = list(extra_args)

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "slime.engine", "--model-path", self.model_path, "--host", self.host,
               "--port", str(self.port), "--threads", str(self.threads), *self.extra_args]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        return cmd
