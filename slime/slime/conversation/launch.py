"""Run the conversation proxy as a child process (the trainer does; tests and benchmarks too)."""

from __future__ import annotations

import sys
from pathlib import Path

from slime.engine.launch import ChildServer


class ProxyProcess(ChildServer):
    """`with ProxyProcess(engine.url, tmp / "conv.db", judge="rules") as proxy: ... proxy.url ...`"""

    name = "conversation proxy"
    ready_path = "/healthz"  # 200 only once the engine behind it answers too

    def __init__(self, engine_url: str, store_path: str | Path, *extra_args: str, judge: str = "rules",
                 host: str = "127.0.0.1", port: int | None = None, api_key: str | None = None,
                 log_path: str | Path | None = None, ready_timeout: float = 120.0, env: dict | None = None):
        super().__init__(port=port, api_key=None, log_path=log_path, ready_timeout=ready_timeout, host=host)
        self.engine_url = engine_url
        self.store_path = Path(store_path)
        self.judge = judge
        self.proxy_api_key = api_key  # /healthz needs no key, so readiness polling goes without it
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "slime.conversation", "serve", "--engine-url", self.engine_url,
               "--store", str(self.store_path), "--host", self.host, "--port", str(self.port),
               "--judge", self.judge, *self.extra_args]
        return cmd

    def environment(self) -> dict:
        env = {**super().environment(), **self.extra_env}
        if self.proxy_api_key:  # through the environment, so the key never shows in `ps`
            env["OPENCLAW_PROXY_API_KEY"] = self.proxy_api_key
        else:
            env.pop("OPENCLAW_PROXY_API_KEY", None)
        return env
