"""The router in front of several pool servers: one URL for the trainer, leases spread to the least-loaded server.

    python -m slime.agentic.env_service.router --workers http://127.0.0.1:18081,http://127.0.0.1:18082 --port 18080

`/allocate` asks every pool server's `/status` (concurrently) and offers the lease to the one with the fewest live
leases (ties: the lowest index). A server's load is the larger of what its status says and what this router knows
it holds (the leases it allocated there and has not seen end, plus allocations on their way), so a burst of
concurrent allocates that all read the same statuses spreads evenly; a status taken while nothing of this router's
was moving on that server corrects the router's count down (a lease the idle reaper closed); a 429 or an unreachable server passes it on to the next-least-loaded; when all
refuse, the last 429 is the answer (back-pressure reaches the client unchanged). A retried allocate with the same
(task_key, request_id) goes to the server that answered it before, so idempotency holds across the router.
Lease ids become `w<index>:<lease>`; the lease calls are forwarded to that server (502 if it cannot be reached).
`/status` fans out and sums. The bearer key rules are the pool server's (`--api-key`, needed beyond loopback);
`--worker-api-key` (default: the same key) is sent to the pool servers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from slime.agentic.env_service.pool import PoolError
from slime.agentic.env_service.pool_server import error_body, read_json, service_app
from slime.agentic.env_service.settings import API_KEY_ENV, LOOPBACK_HOSTS

logger = logging.getLogger(__name__)

LEASE_CALLS = ("/heartbeat", "/reset", "/exec_tool", "/exec", "/evaluate", "/close")


def split_lease(routed: object, n_workers: int) -> tuple[int, str]:
    """`w<index>:<lease>` -> (index, lease)."""
    if not isinstance(routed, str) or not routed:
        raise PoolError(400, "BAD_REQUEST", "lease_id must be a non-empty string")
    head, sep, lease = routed.partition(":")
    if not sep or not head.startswith("w") or not head[1:].isdigit() or not lease:
        raise PoolError(404, "UNKNOWN_LEASE", f"unknown lease {routed!r} (not a router lease id 'w<n>:<lease>')")
    index = int(head[1:])
    if index >= n_workers:
        raise PoolError(404, "UNKNOWN_LEASE", f"unknown lease {routed!r} (no pool server {index})")
    return index, lease


class Router:
    def __init__(self, workers: list[str], worker_api_key: str | None = None, timeout: float = 900.0,
                 idempotency_window_s: float = 300.0):
        if not workers:
            raise ValueError("the router needs at least one pool server URL")
        self.workers = [w.rstrip("/") for w in workers]
        headers = {"Authorization": f"Bearer {worker_api_key}"} if worker_api_key else {}
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5.0), headers=headers,
                                        limits=httpx.Limits(max_connections=512, max_keepalive_connections=64))
        self.idempotency_window_s = idempotency_window_s
        self.sticky: dict[tuple[str, str], tuple[int, float]] = {}
        # what this router knows each server holds: the leases it allocated there and has not seen end (``held``, by
        # id: a repeated close, heartbeat or idempotent allocate of one lease counts once), and allocations and closes
        # on their way (``inflight``, ``closing``). A status can not say whether it already counts an allocation in
        # flight, so adding the two double-counted and a burst could split 5/3; the larger of the two is exact when
        # this router is the server's only client and never below what the server says. ``stale``: held leases a
        # status taken while nothing of ours moved says are gone (the idle reaper closed them), recomputed each time.
        self.held: list[set[str]] = [set() for _ in self.workers]
        self.stale = [0] * len(self.workers)
        self.inflight = [0] * len(self.workers)
        self.closing = [0] * len(self.workers)
        self.moves = [0] * len(self.workers)  # changes of held, inflight, closing: a status is exact only between none
        self.counters = {"allocated": [0] * len(self.workers), "unreachable": 0, "rejected": 0}

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _status(self, index: int) -> dict | None:
        try:
            reply = await self.client.get(self.workers[index] + "/status", timeout=5.0)
            return reply.json().get("pool") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    async def loads(self) -> list[tuple[int, int]]:
        """(load, index) of every reachable pool server, least loaded first (see the module's docstring)."""
        moves_before = list(self.moves)
        statuses = await asyncio.gather(*(self._status(i) for i in range(len(self.workers))))
        loads = []
        for i, status in enumerate(statuses):
            if status is None:
                continue
            reported = int(status.get("total_active_runs", 0))
            if self.moves[i] == moves_before[i] and not self.inflight[i] and not self.closing[i]:
                self.stale[i] = max(0, len(self.held[i]) - reported)  # nothing of ours moved: the status is the truth
            loads.append((max(reported, self.held_count(i) + self.inflight[i]), i))
        return sorted(loads)

    def held_count(self, index: int) -> int:
        return max(0, len(self.held[index]) - self.stale[index])

    def _move(self, index: int, counter: list[int], delta: int) -> None:
        counter[index] = max(0, counter[index] + delta)
        self.moves[index] += 1

    def _hold(self, index: int, lease: str, live: bool) -> None:
        before = len(self.held[index])
        (self.held[index].add if live else self.held[index].discard)(lease)
        if len(self.held[index]) != before:
            self.moves[index] += 1

    async def allocate(self, body: dict) -> JSONResponse:
        task_key, request_id = body.get("task_key"), body.get("request_id")
        if not isinstance(task_key, str) or not task_key.strip():
            raise PoolError(400, "BAD_REQUEST", "task_key must be a non-empty string")
        if request_id is not None and not isinstance(request_id, str):
            raise PoolError(400, "BAD_REQUEST", "request_id must be a string")
        now = time.monotonic()
        for key in [k for k, (_, t) in self.sticky.items() if now - t > self.idempotency_window_s]:
            del self.sticky[key]
        order = [i for _, i in await self.loads()]
        key = (task_key, request_id) if request_id else None
        if key in self.sticky:
            index = self.sticky[key][0]
            order = [index] + [i for i in order if i != index]
        if not order:
            raise PoolError(502, "NO_WORKER", "no pool server is reachable")
        last = None
        for index in order:
            if key is not None:
                # before sending: if the answer is lost after the server allocated, the client's retry (same
                # request id) comes back to this server and gets the same lease, not a second one elsewhere
                self.sticky[key] = (index, now)
            self._move(index, self.inflight, +1)
            try:
                reply = await self.client.post(self.workers[index] + "/allocate", json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as e:  # never reached it: the next server may serve
                self.counters["unreachable"] += 1
                logger.warning("env router: pool server %d (%s) unreachable: %r", index, self.workers[index], e)
                continue
            except httpx.HTTPError as e:  # it may have allocated: no second lease elsewhere; the client retries
                self.counters["unreachable"] += 1
                raise PoolError(504 if isinstance(e, httpx.TimeoutException) else 502, "WORKER_NO_ANSWER",
                                f"pool server {index} did not answer the allocate: {e!r}") from None
            finally:
                self._move(index, self.inflight, -1)
            if reply.status_code == 429:
                last = reply
                continue
            payload = _json(reply)
            if reply.status_code == 200 and payload.get("ok"):
                self._hold(index, payload["lease_id"], True)
                payload["lease_id"] = f"w{index}:{payload['lease_id']}"
                self.counters["allocated"][index] += 1
            return JSONResponse(payload, status_code=reply.status_code)
        if last is not None:
            self.counters["rejected"] += 1
            return JSONResponse(_json(last), status_code=429)
        raise PoolError(502, "NO_WORKER", "no pool server could be reached for allocate")

    async def forward(self, path: str, body: dict) -> JSONResponse:
        index, lease = split_lease(body.get("lease_id"), len(self.workers))
        closing = path == "/close"
        if closing:
            self._move(index, self.closing, +1)
        try:
            reply = await self.client.post(self.workers[index] + path, json={**body, "lease_id": lease})
        except httpx.HTTPError as e:
            self.counters["unreachable"] += 1
            raise PoolError(502, "WORKER_UNREACHABLE", f"pool server {index} cannot be reached: {e!r}") from None
        finally:
            if closing:
                self._move(index, self.closing, -1)
        payload = _json(reply)
        if (closing and reply.status_code == 200) or payload.get("code") == "UNKNOWN_LEASE":
            self._hold(index, lease, False)  # the lease has ended (closed now, or unknown: closed before or reaped)
        return JSONResponse(payload, status_code=reply.status_code)

    async def status(self) -> dict:
        statuses = await asyncio.gather(*(self._status(i) for i in range(len(self.workers))))
        reachable = [s for s in statuses if s is not None]
        return {"workers": [{"url": url, "reachable": s is not None, "pool": s}
                            for url, s in zip(self.workers, statuses)],
                "total_active_runs": sum(s.get("total_active_runs", 0) for s in reachable),
                "pending_closes": sum(s.get("pending_closes", 0) for s in reachable),
                "counters": {k: (list(v) if isinstance(v, list) else v) for k, v in self.counters.items()}}


def _json(reply: httpx.Response) -> dict:
    try:
        payload = reply.json()
    except ValueError:
        return error_body(f"pool server answered {reply.status_code} without JSON", "BAD_WORKER_REPLY")
    return payload if isinstance(payload, dict) else error_body("pool server answered a non-object", "BAD_WORKER_REPLY")


def create_app(workers: list[str], api_key: str | None = None, worker_api_key: str | None = None,
               max_body_bytes: int = 4 * 1024 * 1024, timeout: float = 900.0) -> FastAPI:
    router = Router(workers, worker_api_key if worker_api_key is not None else api_key, timeout)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            yield
        finally:
            await router.aclose()

    app = service_app("slime environment router", lifespan, api_key, max_body_bytes)
    app.state.router = router

    @app.get("/status")
    async def status():
        return {"ok": True, "router": await router.status()}

    @app.post("/allocate")
    async def allocate(request: Request):
        return await router.allocate(await read_json(request))

    def forwarder(path: str):
        async def forward(request: Request):
            return await router.forward(path, await read_json(request))
        return forward

    for path in LEASE_CALLS:
        app.post(path)(forwarder(path))
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default=os.environ.get("WORKER_URLS", ""),
                        help="comma-separated pool server URLs (default: $WORKER_URLS)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("ENV_SERVER_PORT", "18080")))
    parser.add_argument("--api-key", default=os.environ.get(API_KEY_ENV) or None)
    parser.add_argument("--worker-api-key", default=None, help="default: --api-key")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for a pool server's answer")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    workers = [w.strip() for w in args.workers.split(",") if w.strip()]
    if not workers:
        parser.error("no pool servers: --workers URL,URL or $WORKER_URLS")
    if args.host not in LOOPBACK_HOSTS and not args.api_key:
        parser.error(f"binding {args.host} (beyond loopback) needs an API key: --api-key or ${API_KEY_ENV}")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import uvicorn

    uvicorn.run(create_app(workers, args.api_key, args.worker_api_key, timeout=args.timeout), host=args.host,
                port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
