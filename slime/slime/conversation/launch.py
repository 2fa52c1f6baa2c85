"""Run the conversation proxy as a child process (the trainer does; tests and benchmarks too)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from slime.engine.launch import ChildServer, inherited_environment


class ProxyProcess(ChildServer):
    """`with ProxyProcess(engine.url, tmp / "conv.db", judge="rules") as proxy: ... proxy.url ...`, or from the
    trainer's settings file: `ProxyProcess(settings_file=run_dir / "conversation_settings.json", port=...)`.
    `extra_args` are the proxy's own flags (`slime.conversation.settings`)."""

    name = "conversation proxy"
    ready_path = "/healthz"  # 200 only once the engine behind it answers too

    def __init__(self, engine_url: str | None = None, store_path: str | Path | None = None, *extra_args: str,
                 judge: str | None = "rules", settings_file: str | Path | None = None, host: str = "127.0.0.1",
                 port: int | None = None, api_key: str | None = None, log_path: str | Path | None = None,
                 ready_timeout: float = 120.0, env: dict | None = None):
        super().__init__(port=port, api_key=None, log_path=log_path, ready_timeout=ready_timeout, host=host)
        if settings_file is None and (engine_url is None or store_path is None):
            raise ValueError("give the engine URL and the store path, or a settings file")
        self.engine_url = engine_url
        self.store_path = Path(store_path) if store_path is not None else None
        self.settings_file = Path(settings_file) if settings_file is not None else None
        self.judge = judge
        self.proxy_api_key = api_key  # /healthz needs no key, so readiness polling goes without it
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "slime.conversation", "serve"]
        if self.settings_file is not None:
            cmd += ["--settings", str(self.settings_file)]
        if self.engine_url is not None:
            cmd += ["--engine-url", self.engine_url]
        if self.store_path is not None:
            cmd += ["--conversation-store", str(self.store_path)]
        cmd += ["--proxy-host", self.host, "--proxy-port", str(self.port)]
        if self.judge is not None:
            cmd += ["--prm-type", self.judge]
        return cmd + self.extra_args

    def environment(self) -> dict:
        env = {**super().environment(), **self.extra_env}
        if self.proxy_api_key:  # through the environment, so the key never shows in `ps`
            env["OPENCLAW_PROXY_API_KEY"] = self.proxy_api_key
        else:
            env.pop("OPENCLAW_PROXY_API_KEY", None)
        return env


class ConversationJob(ChildServer):
    """A conversation launch script (`openclaw-*/run_cpu_*.sh`) run as a user would: ready once its proxy's
    /healthz answers, stopped with Ctrl-C (SIGINT to its process group), which checkpoints and exits cleanly.

    `with ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh", "--hf-checkpoint", "tiny",
                          env={"RUN_DIR": ...}) as job: ... job.url ...`; `job.process.returncode` after.
    """

    name = "conversation job"
    ready_path = "/healthz"
    stop_signal = signal.SIGINT
    stop_grace = 180.0

    def __init__(self, script: str | Path, *args: str, env: dict | None = None, cwd: str | Path | None = None,
                 port: int | None = None, log_path: str | Path | None = None, ready_timeout: float = 600.0):
        super().__init__(port=port, log_path=log_path, ready_timeout=ready_timeout)
        self.script = str(script)
        self.args = list(args)
        self.extra_env = dict(env or {})
        self.cwd = str(cwd) if cwd else str(Path(__file__).resolve().parents[3])  # the repository root

    def command(self) -> list[str]:
        return ["bash", self.script, *self.args]

    def environment(self) -> dict:
        return {**inherited_environment(), "OMP_NUM_THREADS": "1", "HOST": self.host, "PORT": str(self.port),
                **self.extra_env}
