"""The pool server's settings: one dataclass, built once (from flags, else upstream's environment variables, else the
defaults) and passed whole to the pool, the server and the launcher."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, fields

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
API_KEY_ENV = "ENV_SERVER_API_KEY"


def _env(name: str, default, cast=None):
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return (cast or type(default))(raw)
    except ValueError:
        raise ValueError(f"${name}={raw!r} is not a valid {(cast or type(default)).__name__}") from None


@dataclass(frozen=True)
class PoolSettings:
    """Capacity, lease lifetimes and limits of one pool server (upstream's names in the comments)."""

    provider: str = "command"  # a registered provider name or "module:factory"
    state_dir: str = "runs/env_service/pool"  # lease records (leases.db) and the leases' work directories
    host: str = "127.0.0.1"
    port: int = 18081
    api_key: str | None = None  # required beyond loopback (Authorization: Bearer KEY)
    max_tasks: int = 16  # WORKER_MAX_TASKS: distinct task keys with live leases
    max_runs_per_task: int = 8  # WORKER_MAX_RUNS_PER_TASK: live leases per task key
    idle_ttl_s: float = 600.0  # WORKER_RUN_IDLE_TTL: a lease unused this long is closed by the reaper
    reap_interval_s: float = 60.0  # how often the reaper looks (it also looks on every allocate)
    max_concurrent_closes: int = 10  # WORKER_MAX_CONCURRENT_CLOSES
    idempotency_window_s: float = 300.0  # a retried allocate with the same request_id gets the same lease
    max_body_bytes: int = 4 * 1024 * 1024  # larger requests are refused with 413 before they are read whole
    # a provider's reset/exec/evaluate/close that takes longer answers 504. Layered: above the providers' own
    # limits (the shell tools wait at most 130 s, run_command 240 s), below the router's and client's 900 s
    reset_timeout_s: float = 300.0
    exec_timeout_s: float = 300.0
    evaluate_timeout_s: float = 600.0
    close_timeout_s: float = 60.0
    provider_options: dict = field(default_factory=dict)  # passed to the provider's factory

    def __post_init__(self):
        for name in ("max_tasks", "max_runs_per_task", "max_concurrent_closes", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("idle_ttl_s", "reap_interval_s", "idempotency_window_s", "reset_timeout_s",
                     "exec_timeout_s", "evaluate_timeout_s", "close_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.host not in LOOPBACK_HOSTS and not self.api_key:
            raise ValueError(f"binding {self.host} (beyond loopback) needs an API key: --api-key or ${API_KEY_ENV}")

    @classmethod
    def from_env(cls, **overrides) -> PoolSettings:
        """Upstream's environment variables where set, then `overrides` (None values are ignored)."""
        values = dict(
            max_tasks=_env("WORKER_MAX_TASKS", cls.max_tasks),
            max_runs_per_task=_env("WORKER_MAX_RUNS_PER_TASK", cls.max_runs_per_task),
            idle_ttl_s=_env("WORKER_RUN_IDLE_TTL", cls.idle_ttl_s),
            max_concurrent_closes=_env("WORKER_MAX_CONCURRENT_CLOSES", cls.max_concurrent_closes),
            api_key=os.environ.get(API_KEY_ENV) or None,
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def add_pool_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per settings field (`--max-tasks`, ...), default None so that unset flags fall back to from_env."""
    for f in fields(PoolSettings):
        if f.name == "provider_options":
            parser.add_argument("--provider-option", action="append", default=[], metavar="KEY=VALUE",
                                help="an option for the provider's factory (repeatable)")
            continue
        kind = f.type if isinstance(f.type, type) else {"int": int, "float": float}.get(str(f.type), str)
        parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None)


def settings_from_args(args: argparse.Namespace) -> PoolSettings:
    options = {}
    for item in args.provider_option or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--provider-option {item!r}: expected KEY=VALUE")
        options[key] = value
    overrides = {f.name: getattr(args, f.name, None) for f in fields(PoolSettings) if f.name != "provider_options"}
    return PoolSettings.from_env(**overrides, provider_options=options)
