"""The pool server: upstream's environment-service HTTP contract over a `LeasePool`.

    python -m slime.agentic.env_service.pool_server --provider terminal --port 18081 --state-dir runs/env/pool0

Every reply is JSON with `ok`; errors are `{"ok": false, "code": ..., "error": ...}` with a 4xx/5xx status:

| endpoint | request | reply |
|---|---|---|
| GET /healthz | | `{ok}` |
| GET /status | | `{ok, pool: {max_tasks, active_tasks, max_runs_per_task, total_active_runs, pending_closes, tasks, counters}}` |
| POST /allocate | `{task_key, request_id?}` | `{ok, lease_id, reused}`; 429 `TASK_SLOTS_EXHAUSTED` / `RUN_SLOTS_EXHAUSTED` |
| POST /heartbeat | `{lease_id}` | `{ok}` |
| POST /reset | `{lease_id, task_meta?, run_ctx?, task_timeouts?}` | `{ok, user_msg, tool_schemas, ...}` (the provider's) |
| POST /exec_tool (/exec) | `{lease_id, tool_call: {name, arguments}}` | `{ok, observation, ...}` |
| POST /evaluate | `{lease_id, ...}` | `{ok, score, ...}` |
| POST /close | `{lease_id}` | `{ok, found}` |

An unknown lease is 404 `UNKNOWN_LEASE` (upstream answered 500), a call before `/reset` 409 `NOT_RESET`, a
provider call over its time limit 504 `TIMEOUT`, a body over `max_body_bytes` 413, malformed JSON 400.
With an API key every path but /healthz needs `Authorization: Bearer KEY`; binding beyond loopback needs one.
"""

from __future__ import annotations

import argparse
import json
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from slime.agentic.env_service.pool import LeasePool, PoolError
from slime.agentic.env_service.providers import make_provider
from slime.agentic.env_service.settings import (
    PoolSettings,
    add_pool_arguments,
    settings_from_args,
)
from slime.utils.bearer_auth import BearerAuth

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz"})


def error_body(message: str, code: str = "UNAUTHORIZED") -> dict:
    return {"ok": False, "code": code, "error": message}


class BodyLimit:
    """Refuse bodies over `limit` bytes with 413, by the declared length or while reading, so a huge command
    is never held whole in memory."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = JSONResponse(error_body(f"request body over {self.limit} bytes", "TOO_LARGE"), status_code=413)
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await too_large(scope, receive, send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _BodyTooLarge()
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await too_large(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


async def read_json(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PoolError(400, "BAD_JSON", f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise PoolError(400, "BAD_JSON", "the request body must be a JSON object")
    return body


def service_app(title: str, lifespan, api_key: str | None, max_body_bytes: int) -> FastAPI:
    """What a pool server and the router share: the bearer key, the body limit, errors as `{ok: false, code, error}`
    (a `PoolError` with its status, anything else a logged 500) and `/healthz`."""
    app = FastAPI(title=title, lifespan=lifespan)
    if api_key:
        app.add_middleware(BearerAuth, key=api_key, open_paths=OPEN_PATHS, error_body=error_body)
    app.add_middleware(BodyLimit, limit=max_body_bytes)

    @app.exception_handler(PoolError)
    async def pool_error(request: Request, exc: PoolError):
        return JSONResponse(error_body(exc.message, exc.code), status_code=exc.status)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        logger.exception("env service: unhandled error on %s", request.url.path)
        return JSONResponse(error_body(f"internal error: {type(exc).__name__}: {exc}", "INTERNAL"), status_code=500)

    @app.get("/healthz")
    async def healthz():
        return {"ok": True}

    return app


def create_app(settings: PoolSettings, provider=None) -> FastAPI:
    pool = LeasePool(settings, provider or make_provider(settings.provider, settings.provider_options))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await pool.start()
        try:
            yield
        finally:
            await pool.shutdown()

    app = service_app("slime environment pool server", lifespan, settings.api_key, settings.max_body_bytes)
    app.state.pool = pool

    @app.get("/status")
    async def status():
        return {"ok": True, "pool": pool.status()}

    @app.post("/allocate")
    async def allocate(request: Request):
        body = await read_json(request)
        lease_id, reused = await pool.allocate(body.get("task_key"), body.get("request_id"))
        return {"ok": True, "lease_id": lease_id, "reused": reused}

    @app.post("/heartbeat")
    async def heartbeat(request: Request):
        pool.heartbeat((await read_json(request)).get("lease_id"))
        return {"ok": True}

    @app.post("/reset")
    async def reset(request: Request):
        body = await read_json(request)
        reply = await pool.reset(body.get("lease_id"), body)
        return {"ok": True, **reply}

    async def exec_tool(request: Request):
        body = await read_json(request)
        return {"ok": True, **await pool.exec_tool(body.get("lease_id"), body.get("tool_call"))}

    app.post("/exec_tool")(exec_tool)
    app.post("/exec")(exec_tool)

    @app.post("/evaluate")
    async def evaluate(request: Request):
        body = await read_json(request)
        return {"ok": True, **await pool.evaluate(body.get("lease_id"), body)}

    @app.post("/close")
    async def close(request: Request):
        body = await read_json(request)
        lease_id = body.get("lease_id")
        if not isinstance(lease_id, str) or not lease_id:
            raise PoolError(400, "BAD_REQUEST", "lease_id must be a non-empty string")
        return {"ok": True, "found": await pool.close(lease_id)}

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pool_arguments(parser)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args)
    except ValueError as e:
        parser.error(str(e))
    import uvicorn

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level,
                timeout_graceful_shutdown=30)


if __name__ == "__main__":
    main()
