"""The SGLang router (`python -m sglang_router.launch_router`) in front of several engines of one role.

Generation (`/generate`, `/v1/chat/completions`) goes through the router, which balances requests and, with
the default cache_aware policy, sends prompts that share a prefix to the engine that already holds it in its
radix cache. Weight updates do NOT go through the router: a router forwards a request to one worker, but
every engine must load every new version (and report success), so the trainer calls each worker's URL
directly (`RolloutEngines.worker_urls`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from slime.engine.launch import ChildServer

ROUTER_POLICIES = ("cache_aware", "round_robin", "random", "power_of_two")


@dataclass(frozen=True)
class RouterConfig:
    worker_urls: tuple[str, ...]
    port: int
    host: str = "127.0.0.1"
    policy: str = "cache_aware"
    api_key: str | None = None
    log_level: str = "warn"
    # Upstream slime's 4 h: a long agent turn must not be cut by the router (the engines have their own limits).
    request_timeout_secs: int | None = 14400
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not self.worker_urls:
            raise ValueError("a router needs at least one worker URL")
        if self.policy not in ROUTER_POLICIES:
            raise ValueError(f"router policy must be one of {ROUTER_POLICIES}, got {self.policy!r}")


def router_command(config: RouterConfig, python: str = sys.executable) -> list[str]:
    cmd = [python, "-m", "sglang_router.launch_router", "--worker-urls", *config.worker_urls,
           "--host", config.host, "--port", str(config.port), "--policy", config.policy,
           "--log-level", config.log_level]
    if config.request_timeout_secs is not None:
        cmd += ["--request-timeout-secs", str(config.request_timeout_secs)]
    if config.api_key:
        cmd += ["--api-key", config.api_key]
    return cmd + list(config.extra_args)


class SGLangRouter(ChildServer):
    """The router as a child process; ready once `/health` answers (it waits for its workers itself)."""

    name = "sglang-router"

    def __init__(self, config: RouterConfig, *, log_path: str | Path | None = None, ready_timeout: float = 600.0):
        super().__init__(port=config.port, api_key=config.api_key, log_path=log_path, ready_timeout=ready_timeout,
                         host=config.host)
        self.config = config

    def command(self) -> list[str]:
        return router_command(self.config)
