"""Upstream slime's `slime.utils.async_utils.run`, for ported method folders: run a coroutine to completion from
synchronous code (a rollout function) and return its result.

Each call gets a fresh event loop (in a helper thread when the calling thread already runs one), and the engine
clients that loop opened are closed with it, as `slime.rollout.default_rollout.generate_rollout` does."""

from __future__ import annotations

from typing import Any, Awaitable


def run(coro: Awaitable) -> Any:
    from slime.rollout.default_rollout import run_coroutine

    return run_coroutine(coro)


__all__ = ["run"]
