"""Upstream slime's `slime.utils.http_utils.post` / `get`, for method folders ported from OpenClaw-RL (PORTING.md):
JSON to an engine or router URL (`http://{args.sglang_router_ip}:{args.sglang_router_port}/generate`), the JSON
answer back. The engine key (`SLIME_ENGINE_API_KEY`) is sent when set, as the trainer's own clients do.

A connection that fails (an engine restarting, a router not ready yet) is retried up to `max_retries` times, a
second apart; an HTTP error is raised at once with the status and the start of the body (retrying a 400 cannot
help). Each event loop gets its own connection pool, closed with the loop's other engine clients."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx

_clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}


def _client() -> httpx.AsyncClient:
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        key = os.environ.get("SLIME_ENGINE_API_KEY")
        client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0),
                                   headers={"Authorization": f"Bearer {key}"} if key else {},
                                   limits=httpx.Limits(max_connections=1024, max_keepalive_connections=256))
        _clients[loop] = client
    return client


async def _request(method: str, url: str, payload: Any, max_retries: int) -> Any:
    attempt = 0
    while True:
        try:
            response = await _client().request(method, url, json=payload)
            break
        except httpx.TransportError:
            if attempt >= max_retries:
                raise
            attempt += 1
            await asyncio.sleep(1.0)
    if response.status_code >= 400:
        raise RuntimeError(f"{method} {url}: HTTP {response.status_code}: {response.text[:500]}")
    return response.json() if response.content else None


async def post(url: str, payload: Any = None, max_retries: int = 60, *, json: Any = None) -> Any:
    """POST `payload` (or `json=`) as JSON to `url`; the decoded answer."""
    return await _request("POST", url, payload if json is None else json, max_retries)


async def get(url: str, max_retries: int = 60) -> Any:
    return await _request("GET", url, None, max_retries)


async def close_clients() -> None:
    """Close the running loop's pool (the default rollout does it when its loop ends)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()


__all__ = ["close_clients", "get", "post"]
