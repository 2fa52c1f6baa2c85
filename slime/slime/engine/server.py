"""HTTP routes of the embedded engine: the SGLang surface named in ARCHITECTURE.md, over FastAPI."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.requests import ClientDisconnect
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ValidationError

from slime.engine import chat_api, generate_api
from slime.utils.bearer_auth import BearerAuth  # noqa: F401  (re-exported: the proxy imports it from here)
from slime.engine.engine import Engine, raise_if_failed
from slime.engine.protocol import APIError, ChatCompletionRequest, GenerateRequest, validation_error
from slime.engine.scheduler import SamplingConfig, Sequence
from slime.engine.weights import WeightUpdateError

log = logging.getLogger(__name__)

# Liveness must answer without credentials so that orchestrators can probe it.


async def _parse(request: Request, model: type[BaseModel]):
    """The body as `model` (for chat, `ChatCompletionRequest` runs `chat_validation` itself), or a 400."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # the caller gave up (e.g. a rollout cancelling surplus requests)
        raise APIError(400, "client disconnected before the request body was read") from None
    try:
        data = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise APIError(400, f"malformed JSON body: {exc}") from None
    if not isinstance(data, dict):
        raise APIError(400, "the JSON body must be an object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from None


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n".encode()


async def _build(engine, build, req):
    """`build(engine, req)`: a vision model's requests may carry images to decode and preprocess (PIL resizing, patch
    layout, hashing), work kept off the event loop so the streams in flight keep flowing; text requests only
    tokenize, in place."""
    if engine.vision is not None:
        return await asyncio.to_thread(build, engine, req)
    return build(engine, req)


def _event_stream(objects) -> StreamingResponse:
    """Server-sent events: one `data:` line per object, `[DONE]` at the end, an error object on failure."""

    async def body():
        try:
            async for obj in objects:
                yield _sse(obj)
            yield b"data: [DONE]\n\n"
        except APIError as exc:
            yield _sse(exc.body())

    return StreamingResponse(body(), media_type="text/event-stream")


async def _watch_disconnect(request: Request, sequences: list[Sequence]):
    """Cancel a non-streaming request's sequences when its client goes away, freeing batch slots."""
    while not all(s.finished for s in sequences):
        if await request.is_disconnected():
            for seq in sequences:
                seq.cancelled = True
            return
        # is_disconnected() is cheap; a short poll bounds the tokens generated for nobody (~0.1 s of decoding)
        await asyncio.sleep(0.1)


async def _run_watched(engine: Engine, request: Request, sequences: list[Sequence]):
    watcher = asyncio.create_task(_watch_disconnect(request, sequences))
    try:
        await engine.run(sequences)
    finally:
        watcher.cancel()


def install_error_handlers(app: FastAPI, logger: logging.Logger) -> None:
    """Every error leaves in the OpenAI shape: `APIError`s as raised, anything unexpected as a logged 500."""

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception):
        logger.exception("unhandled error on %s", request.url.path)
        err = APIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")
        return JSONResponse(err.body(), status_code=500)


def create_app(engine: Engine) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        engine.stop()

    app = FastAPI(title="slime embedded engine", lifespan=lifespan)
    started_at = time.time()

    if engine.config.api_key:
        app.add_middleware(BearerAuth, key=engine.config.api_key)

    install_error_handlers(app, log)

    # --- generation -----------------------------------------------------------------------
    @app.post("/generate")
    async def generate(request: Request):
        req = await _parse(request, GenerateRequest)
        sequences, many = await _build(engine, generate_api.build_sequences, req)
        if req.stream:
            updates = engine.stream(sequences)

            async def objects():
                async for index, finished in updates:
                    if finished:
                        raise_if_failed([sequences[index]])
                    obj = generate_api.response_object(engine, sequences[index], req)
                    if many:
                        obj["index"] = index
                    yield obj

            return _event_stream(objects())
        await _run_watched(engine, request, sequences)
        outputs = [generate_api.response_object(engine, seq, req) for seq in sequences]
        return outputs if many else outputs[0]

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        # the model runs OpenAI's validation first (OpenAI's messages), then adds what is specific to this engine
        req = await _parse(request, ChatCompletionRequest)
        sequences = await _build(engine, chat_api.build_sequences, req)
        responder = chat_api.ChatResponder(engine, req, sequences)
        if req.stream:
            return _event_stream(responder.chunks(engine.stream(sequences)))
        await _run_watched(engine, request, sequences)
        return responder.response()

    # --- weights and cache ----------------------------------------------------------------
    @app.post("/update_weights_from_disk")
    async def update_weights_from_disk(request: Request):
        req = await _parse(request, UpdateWeightsRequest)
        version = None if req.weight_version is None else str(req.weight_version)
        try:
            new_version = await engine.update_weights(req.model_path, version, req.abort_all_requests)
        except WeightUpdateError as exc:
            return JSONResponse(
                {"success": False, "message": str(exc), **APIError(400, str(exc), param="model_path").body()},
                status_code=400,
            )
        return {
            "success": True,
            "message": f"weights from {req.model_path} are served as version {new_version}",
            "weight_version": new_version,
            "num_paused_requests": 0,
        }

    @app.post("/flush_cache")
    async def flush_cache():
        engine.scheduler.flush_cache()
        return {"success": True, "message": "prefix cache flushed"}

    # --- health and information -----------------------------------------------------------
    @app.get("/health")
    async def health():
        if not engine.scheduler.alive:
            return JSONResponse(APIError(503, "engine loop is not running", type="server_error").body(), 503)
        return {"status": "ok", "weight_version": engine.weight_version}

    @app.get("/health_generate")
    async def health_generate():
        probe = Sequence(prompt_ids=[0], sampling=SamplingConfig(max_new_tokens=1, temperature=0.0))
        try:
            await asyncio.wait_for(engine.run([probe]), timeout=60)
        except (APIError, asyncio.TimeoutError) as exc:
            message = getattr(exc, "message", "timed out generating one token")
            return JSONResponse(APIError(503, message, type="server_error").body(), 503)
        return {"status": "ok", "weight_version": engine.weight_version}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [
                {
                    "id": engine.served_model_name,
                    "object": "model",
                    "created": int(started_at),
                    "owned_by": "slime",
                    "root": engine.model_path,
                    "max_model_len": engine.context_length,
                }
            ],
        }

    @app.get("/get_model_info")
    async def model_info():
        return {
            "model_path": engine.model_path,
            "tokenizer_path": engine.model_path,
            "served_model_name": engine.served_model_name,
            "is_generation": True,
            "context_length": engine.context_length,
            "vocab_size": engine.vocab_size,
            "weight_version": engine.weight_version,
        }

    @app.get("/get_weight_version")
    async def weight_version():
        return {"weight_version": engine.weight_version}

    @app.get("/get_server_info")
    async def server_info():
        cfg = engine.config
        return {
            "model_path": engine.model_path,
            "served_model_name": engine.served_model_name,
            "dtype": cfg.dtype,
            "device": cfg.device,
            "context_length": engine.context_length,
            "max_running_requests": cfg.max_running_requests,
            "max_queued_requests": cfg.max_queued_requests,
            "chunked_prefill_size": cfg.chunked_prefill_size,
            "prefix_cache_tokens": cfg.prefix_cache_tokens,
            "weight_version": engine.weight_version,
            "load": engine.scheduler.load(),
            "stats": dict(engine.scheduler.stats),
            "prefix_cache": {"tokens": engine.scheduler.prefix_cache.size_tokens,
                             "lookups": engine.scheduler.prefix_cache.lookups,
                             "hits": engine.scheduler.prefix_cache.hits},
            "last_error": engine.scheduler.last_error,
        }

    return app


class UpdateWeightsRequest(BaseModel):
    model_config = {"extra": "ignore", "strict": True}
    model_path: str
    weight_version: str | int | None = None
    load_format: str | None = None
    abort_all_requests: bool = False
