"""The OpenAI-compatible conversation proxy: serve the policy, keep every turn, judge it from what follows.

    python -m slime.conversation serve --engine-url http://127.0.0.1:30010 --store runs/x/conversations.db

Routes: `POST /v1/chat/completions` (streamed token by token, or whole), `GET /v1/models`, `GET /healthz`
(200 only while the engine answers), `POST /v1/feedback` (a rating and/or comment on a turn),
`GET /v1/stats`, `POST /v1/sessions/done` (`{"session_id"}`: the client ended it), `GET /v1/sessions?limit=&offset=&active=1` (a page of per-session counts, most recent first)
and `GET /v1/sessions/{id}` (one session with a row per turn). A bearer key (`--api-key`,
`$OPENCLAW_PROXY_API_KEY`) is required whenever the proxy binds beyond loopback; it is the proxy's own key,
never the engine's. `OPENCLAW_DEBUG=1` or `ROLLOUT_LOG_LEVEL=DEBUG|INFO|...` override `--log-level`: at DEBUG the
proxy logs how each request was classified and what each judged turn became.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import sys
import time
from contextlib import asynccontextmanager

import aiohttp
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.requests import ClientDisconnect

from slime.conversation import sessions
from slime.conversation import traces as traces_mod
from slime.conversation.relay import (ForwardPolicy, SampledTurn, build_forward_body, client_chunk,
                                      client_response)
from slime.conversation.service import ConversationService, FeedbackError
from slime.conversation.settings import ConversationSettings, from_cli
from slime.conversation import rollout_dir
from slime.conversation.store import ConversationStore, LeaseLost
from slime.engine.chat_validation import validate_chat_request
from slime.engine.protocol import APIError
from slime.engine.server import BearerAuth, install_error_handlers

log = logging.getLogger("slime.conversation")

OPEN_PATHS = frozenset({"/healthz"})


def validate_chat_body(body) -> list[dict]:
    """The body checked as OpenAI checks it (`slime.engine.chat_validation`), before any bookkeeping: a request
    OpenAI would refuse gets its 400 here and never opens a turn. Returns the messages."""
    return validate_chat_request(body)


def health_weight_version(body: str) -> str | int | None:
    """The weight version an engine's GET /health reports: ours answers a JSON object with it; vLLM an empty 200 and
    SGLang a short text (no version: only the status says it is up)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    return payload.get("weight_version") if isinstance(payload, dict) else None


def create_app(config: ConversationSettings, method) -> FastAPI:
    """`method`: a `methods.TurnEvaluator` (what judged turns become), or a bare judge = Binary RL."""
    state: dict = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        headers = {"Authorization": f"Bearer {config.engine_api_key}"} if config.engine_api_key else {}
        # aiohttp rather than httpx here: its C HTTP parser makes relaying a token stream several times cheaper
        state["http"] = aiohttp.ClientSession(
            base_url=config.engine_url + "/", headers={**headers, "Content-Type": "application/json"},
            connector=aiohttp.TCPConnector(limit=512, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=config.upstream_timeout),
            json_serialize=lambda obj: orjson.dumps(obj).decode())
        state["store"] = ConversationStore(config.conversation_store)
        state["service"] = ConversationService(
            state["store"], method, judge_timeout=config.prm_timeout,
            judge_concurrency=config.prm_max_concurrency, session_idle_ttl=config.session_idle_ttl)
        state["health"] = (0.0, False, None)
        await state["service"].start()
        yield
        await state["service"].stop()
        await state["http"].close()
        state["store"].close()

    app = FastAPI(title="slime conversation proxy", lifespan=lifespan, **_NO_TELEMETRY)
    if config.api_key:
        app.add_middleware(BearerAuth, key=config.api_key, open_paths=OPEN_PATHS)
    policy = ForwardPolicy(served_model_name=config.served_model_name,
                           max_response_tokens=config.max_response_tokens, temperature=config.temperature)

    install_error_handlers(app, log)

    async def read_json(request: Request):
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > config.max_body_bytes:
            raise APIError(413, f"request body of {declared} bytes exceeds the limit of {config.max_body_bytes}")
        chunks, size = [], 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > config.max_body_bytes:
                    raise APIError(413, f"request body exceeds the limit of {config.max_body_bytes} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            raise APIError(400, "client disconnected before the request body was read") from None
        try:
            return orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError as exc:
            raise APIError(400, f"malformed JSON body: {exc}") from None

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        body = await read_json(request)
        messages = validate_chat_body(body)
        meta = sessions.resolve_meta(request.headers, body)
        service: ConversationService = state["service"]
        service.begin_request(meta.session_id)
        streaming = False
        try:
            response = await _serve_chat(body, messages, meta, service)
            streaming = isinstance(response, StreamingResponse)
            return response
        finally:
            if not streaming:  # a stream ends the request when its last byte is out
                service.end_request(meta.session_id)

    async def _serve_chat(body, messages, meta, service):
        await service.before_forward(meta, messages)
        forward, wants = build_forward_body(body, policy)
        stored_request = {k: v for k, v in forward.items()
                          if k not in ("logprobs", "return_token_ids", "stream_options", "top_logprobs")}
        http: aiohttp.ClientSession = state["http"]
        sampled = SampledTurn()
        try:
            upstream = await http.post("v1/chat/completions", data=orjson.dumps(forward))
        except (aiohttp.ClientError, OSError) as exc:
            raise APIError(502, f"policy engine unreachable: {type(exc).__name__}: {exc}",
                           type="server_error") from None
        if upstream.status != 200:
            content = await upstream.read()
            upstream.release()
            return _relay_error(upstream.status, content)
        if not wants.stream:
            try:
                data = orjson.loads(await upstream.read())
            finally:
                upstream.release()
            sampled.absorb_response(data)
            sampled.complete = True
            await service.record_turn(meta, stored_request, sampled)
            return Response(orjson.dumps(client_response(data, wants, meta.session_id)),
                            media_type="application/json", headers={"X-Session-Id": meta.session_id})

        async def events():
            # Whatever the engine has sent so far is relayed in one write: under load several tokens arrive
            # together, and one write per token would cost more than everything else the proxy does.
            # This loop runs once per read of every stream: it is the proxy's hot path (bench/proxy_capacity.py).
            pending = b""
            recorded = False
            session_id = meta.session_id
            loads, dumps = orjson.loads, orjson.dumps
            try:
                async for raw in upstream.content.iter_any():
                    lines = (pending + raw if pending else raw).split(b"\n")
                    pending = lines.pop()
                    out = []
                    for line in lines:
                        if not line.startswith(b"data:"):
                            continue  # the blank line between events (and SSE comments)
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            sampled.complete = True
                            continue
                        item = loads(payload)
                        if "error" in item and "choices" not in item:
                            out.append(b"data: " + dumps(item) + b"\n\n")
                            continue
                        sampled.absorb_chunk(item)
                        chunk = client_chunk(item, wants, session_id)
                        if chunk is not None:
                            out.append(b"data: " + dumps(chunk) + b"\n\n")
                    if sampled.complete and not recorded:
                        # the turn must be matchable before the client can see [DONE] and send its next
                        # request (the row itself is written in the background)
                        await service.record_turn(meta, stored_request, sampled)
                        recorded = True
                        out.append(b"data: [DONE]\n\n")
                    if out:
                        yield out[0] if len(out) == 1 else b"".join(out)
                if not sampled.complete:
                    yield _sse(APIError(502, "policy engine stream ended early", type="server_error").body())
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                yield _sse(APIError(502, f"policy engine stream broke: {exc}", type="server_error").body())
            finally:
                upstream.release()
                try:
                    if not recorded:  # the stream broke or the client left: kept as an aborted turn
                        await asyncio.shield(service.record_turn(meta, stored_request, sampled, aborted=True))
                finally:
                    service.end_request(meta.session_id)

        return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Session-Id": meta.session_id})

    @app.get("/v1/models")
    async def models():
        try:
            async with state["http"].get("v1/models") as upstream:
                data = await upstream.json()
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            raise APIError(503, f"policy engine unavailable: {exc}", type="server_error") from None
        if config.served_model_name:
            for entry in data.get("data", []):
                entry["id"] = config.served_model_name
        return data

    @app.get("/healthz")
    async def healthz():
        checked, ok, version = state["health"]
        if time.monotonic() - checked > 1.0:
            try:
                async with state["http"].get("health", timeout=aiohttp.ClientTimeout(total=5.0)) as response:
                    ok = response.status == 200
                    version = health_weight_version(await response.text()) if ok else None
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
                ok, version = False, None
            state["health"] = (time.monotonic(), ok, version)
        body = {"ok": ok, "engine": "ready" if ok else "unavailable", "weight_version": version}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.post("/v1/feedback")
    async def feedback(request: Request):
        body = await read_json(request)
        if not isinstance(body, dict):
            raise APIError(400, "the JSON body must be an object")
        session_id = body.get("session_id") or request.headers.get("x-session-id")
        if not isinstance(session_id, str) or not session_id:
            raise APIError(400, "session_id is required (body or X-Session-Id header)", param="session_id")
        turn = body.get("turn")
        if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
            raise APIError(400, "turn: a positive integer (1-based turn number) or omitted for the latest",
                           param="turn")
        rating = parse_rating(body.get("rating"))
        text = body.get("text")
        if text is not None and not isinstance(text, str):
            raise APIError(400, "text must be a string", param="text")
        if rating is None and not (text and text.strip()):
            raise APIError(400, "give a rating (1/-1, 'up'/'down') and/or a non-empty text", param="rating")
        try:
            return await state["service"].feedback(session_id, turn, rating, text)
        except FeedbackError as exc:
            raise APIError(exc.status, str(exc)) from None

    async def trace_tokenizer():
        """The policy's tokenizer and context length, loaded on the first trace (serving chat needs neither)."""
        async with state.setdefault("tokenizer_lock", asyncio.Lock()):
            if "tokenizer" not in state:
                try:
                    state["tokenizer"] = await asyncio.to_thread(_policy_tokenizer, config)
                    async with state["http"].get("v1/models") as upstream:
                        entry = (await upstream.json())["data"][0]
                    state["context_length"] = entry.get("max_model_len") or entry.get("context_length")
                except Exception as exc:  # noqa: BLE001 - the engine is away or answers nonsense
                    raise APIError(503, f"cannot load the policy's tokenizer for traces: {exc}",
                                   type="server_error") from None
        return state["tokenizer"], state["context_length"]

    @app.post("/v1/traces")
    async def ingest_traces(request: Request):
        body = await read_json(request)
        parsed, is_batch = traces_mod.parse_traces(body)
        tokenizer, context = await trace_tokenizer()
        service: ConversationService = state["service"]
        # one worker-thread hop for the whole batch: rendering is the CPU-heavy part
        items = await asyncio.to_thread(traces_mod.tokenize_all, tokenizer, parsed, context, is_batch)
        results = await service.ingest_traces(items)
        if not is_batch:
            return results[0]
        duplicates = sum(r["duplicate"] for r in results)
        return {"accepted": len(results) - duplicates, "duplicates": duplicates, "results": results}

    @app.get("/v1/traces/{trace_id}")
    async def trace_status(trace_id: str):
        await state["service"].settle_writes()
        turn = await asyncio.to_thread(state["store"].trace_turn, trace_id)
        if turn is None:
            raise APIError(404, f"no trace with id {trace_id!r}", param="trace_id")
        return {"trace_id": trace_id, "session_id": turn.session_id, "turn": turn.turn_num, "status": turn.status,
                "score": (turn.judgement or {}).get("score"), "exclusion_reason": turn.exclusion_reason,
                "sample": await asyncio.to_thread(state["store"].sample_state, turn.id)}

    @app.post("/v1/traces/{trace_id}/feedback")
    async def trace_feedback(trace_id: str, request: Request):
        body = await read_json(request)
        if not isinstance(body, dict):
            raise APIError(400, "the JSON body must be an object")
        unknown = sorted(set(body) - {"feedback", "polarity"})
        if unknown:
            raise APIError(400, f"unknown field(s) {unknown}; give feedback (text) and/or polarity", param=unknown[0])
        text = body.get("feedback")
        if text is not None and not isinstance(text, str):
            raise APIError(400, "feedback must be a string", param="feedback")
        polarity = traces_mod.parse_polarity(body.get("polarity"))
        if polarity is None and not (text and text.strip()):
            raise APIError(400, "give feedback (non-empty text) and/or a polarity", param="feedback")
        try:
            return await state["service"].trace_feedback(trace_id, polarity, text)
        except FeedbackError as exc:
            raise APIError(exc.status, str(exc)) from None

    def _collector(body) -> str:
        if not isinstance(body, dict):
            raise APIError(400, "the JSON body must be an object")
        collector = body.get("collector")
        if not isinstance(collector, str) or not 0 < len(collector) <= 200:
            raise APIError(400, "collector: a string naming this collector (1-200 characters)", param="collector")
        return collector

    @app.post("/v1/rollouts/claim")
    async def rollouts_claim(request: Request):
        """`collect --api-endpoint`: take (or renew) the store's lease for the collector and claim pending samples
        for a rollout file; they stay claimed until /ack says the file is written."""
        body = await read_json(request)
        collector = _collector(body)
        limit, ttl = body.get("limit"), body.get("lease_ttl", 60.0)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise APIError(400, "limit: a positive integer or null", param="limit")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= 3600:
            raise APIError(400, "lease_ttl: seconds in (0, 3600]", param="lease_ttl")
        store: ConversationStore = state["store"]
        await state["service"].settle_writes()
        host = request.client.host if request.client else "?"
        holder = await asyncio.to_thread(store.acquire_trainer_lease, collector, host, 0, float(ttl))
        if holder is not None:
            raise APIError(409, f"another trainer (or collector) holds the store: {holder['owner']}, last seen "
                                f"{time.time() - holder['heartbeat']:.0f} s ago")
        # the lease holder is the only one who claims: anything still claimed is a batch whose file was never
        # acknowledged (a collector that died, or an /ack that failed), and goes back to the queue
        await asyncio.to_thread(store.release_untrained)
        batch_id = rollout_dir.export_batch_id()
        rows = await asyncio.to_thread(store.claim_for_export, batch_id, collector, limit,
                                       bool(body.get("session_aware")))
        return {"batch_id": batch_id, "rows": rows}

    @app.post("/v1/rollouts/ack")
    async def rollouts_ack(request: Request):
        body = await read_json(request)
        collector = _collector(body)
        batch_id = body.get("batch_id")
        if not isinstance(batch_id, int) or isinstance(batch_id, bool):
            raise APIError(400, "batch_id: the id /v1/rollouts/claim returned", param="batch_id")
        try:
            return {"exported": await asyncio.to_thread(state["store"].mark_exported, batch_id, collector)}
        except LeaseLost as exc:
            raise APIError(409, str(exc)) from None

    @app.post("/v1/rollouts/release")
    async def rollouts_release(request: Request):
        collector = _collector(await read_json(request))
        await asyncio.to_thread(state["store"].release_trainer_lease, collector)
        return {"released": True}

    @app.get("/v1/stats")
    async def stats():
        await state["service"].settle_writes()  # count the turns answered just before this request too
        data = await asyncio.to_thread(state["store"].stats)
        data["proxy"] = state["service"].snapshot()
        return data

    @app.get("/v1/sessions")
    async def list_sessions(request: Request):
        params = request.query_params
        limit = _query_int(params, "limit", 50, 1, MAX_SESSIONS_PAGE)
        offset = _query_int(params, "offset", 0, 0, None)
        active = params.get("active", "").strip().lower() in ("1", "true", "yes", "on")
        await state["service"].settle_writes()
        return await asyncio.to_thread(state["store"].session_summaries, limit, offset, active)

    @app.post("/v1/sessions/done")
    async def session_done(request: Request):
        """The client ended a session ({"session_id": ...}): what `X-Session-Done` says on a request, for clients
        that learn it after the session's last request (the OpenClaw plugin's `session_end` hook)."""
        body = await read_json(request)
        session_id = body.get("session_id") if isinstance(body, dict) else None
        if not isinstance(session_id, str) or not session_id.strip():
            raise APIError(400, "session_id: a non-empty string is required", param="session_id")
        service: ConversationService = state["service"]
        await service.settle_writes()  # the session's last turn may still be on its way to the store
        if not await service.finalize_session(session_id.strip(), "session_done"):
            # a session that never made a model request (or a typo): nothing to end, and the caller should know
            raise APIError(404, f"no session {session_id.strip()!r}", param="session_id")
        return {"session_id": session_id.strip(), "finalized": True}

    @app.get("/v1/sessions/{session_id:path}")
    async def session_detail(session_id: str):
        await state["service"].settle_writes()
        detail = await asyncio.to_thread(state["store"].session_detail, session_id)
        if detail is None:
            raise APIError(404, f"no session {session_id!r}", param="session_id")
        return detail

    return app


MAX_SESSIONS_PAGE = 1000

# FastAPI >= 0.16x instruments every request with OpenTelemetry unless told not to: deciding that it has nothing
# to report (environment look-ups, provider checks) cost ~4% of the proxy's CPU per streamed request.
_NO_TELEMETRY = ({"telemetry": {"tracing": False, "metrics": False, "logs": False}}
                 if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {})


def _query_int(params, name: str, default: int, minimum: int, maximum: int | None) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bounds = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise APIError(400, f"{name}: an integer {bounds} is required, got {raw!r}", param=name)
    return value


def parse_rating(value) -> int | None:
    if value is None:
        return None
    aliases = {"up": 1, "good": 1, "+1": 1, "1": 1, "👍": 1, "down": -1, "bad": -1, "-1": -1, "👎": -1,
               "0": 0, "neutral": 0}
    if isinstance(value, bool):
        raise APIError(400, "rating must be 1, 0, -1, 'up' or 'down'", param="rating")
    if isinstance(value, (int, float)) and value in (1, 0, -1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in aliases:
        return aliases[value.strip().lower()]
    raise APIError(400, f"rating must be 1, 0, -1, 'up' or 'down', got {value!r}", param="rating")


def _relay_error(status: int, content: bytes) -> JSONResponse:
    """The engine's own error (its status and OpenAI-shaped body) reaches the client unchanged."""
    try:
        body = json.loads(content)
    except ValueError:
        body = APIError(status, content.decode(errors="replace")[:2000] or "engine error", type="server_error").body()
    return JSONResponse(body, status_code=status)


def _sse(obj) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


# ------------------------------------------------------------------------------------------- command line

def build_evaluator(config: ConversationSettings):
    """The method named by the settings, with the judges and the teacher it uses."""
    from slime.conversation.judges.registry import build_hint_judge, build_judge
    from slime.conversation.methods import TeacherScorer, TurnEvaluator, load_method

    method = load_method(config.resolved_method(), **config.conversation_method_options)
    judge_url = (config.prm_engine_url or config.engine_url).rstrip("/")
    # a separate judge engine never gets the policy engine's key
    judge_key = config.judge_api_key or (None if config.prm_engine_url else config.engine_api_key)
    llm_options = {"engine_url": judge_url, "api_key": judge_key, "m": config.prm_m,
                   "temperature": config.prm_temperature, "max_new_tokens": config.prm_max_new_tokens,
                   "timeout": config.prm_vote_timeout, "max_concurrency": config.prm_max_concurrency}
    judge = None
    if method.uses_reward_judge:
        kind = config.resolved_judge()
        judge = build_judge(kind, **(llm_options if kind == "llm" else {}))
    if not method.uses_hints:
        return TurnEvaluator(method, judge=judge)
    teacher_url = (config.teacher_engine_url or config.prm_engine_url or config.engine_url).rstrip("/")
    teacher_key = config.engine_api_key if teacher_url == config.engine_url else config.judge_api_key
    teacher = TeacherScorer(teacher_url, _policy_tokenizer(config), top_k=config.distill_topk or 0,
                            temperature=config.teacher_temperature or config.temperature or 1.0, api_key=teacher_key,
                            max_concurrency=config.teacher_concurrency)
    hint_options: dict = {}
    if "llm" in config.hint_judge_type.split("+"):
        hint_options = dict(llm_options)
        if config.hint_select == "overlap":
            hint_options.update(select="overlap", overlap_scorer=teacher.overlap)
    hint_judge = build_hint_judge(config.hint_judge_type, **hint_options)
    demonstrator = None
    if config.teacher_demonstrations > 0:
        from slime.conversation.demonstrations import TeacherDemonstrator
        from slime.engine.client import AsyncEngineClient

        # the teacher writes under the hinted prompt; the policy engine scores its reply under the student's
        demonstrator = TeacherDemonstrator(
            AsyncEngineClient(teacher_url, api_key=teacher_key, timeout=300.0),
            AsyncEngineClient(config.engine_url, api_key=config.engine_api_key, timeout=300.0),
            teacher.builder, count=config.teacher_demonstrations, temperature=teacher.temperature,
            max_new_tokens=config.max_response_tokens or 1024, top_k=config.distill_topk or 0,
            candidates=config.teacher_demonstration_candidates,
            opening_tokens=config.teacher_demonstration_tokens,
            check_answers=config.teacher_demonstration_check == "answers", max_concurrency=config.teacher_concurrency)
    return TurnEvaluator(method, judge=judge, hint_judge=hint_judge, teacher=teacher, demonstrator=demonstrator)


def _policy_tokenizer(config: ConversationSettings):
    """The tokenizer the engine renders prompts with: teacher prompts must be rendered the same way."""
    from transformers import AutoTokenizer

    path = config.tokenizer_path
    if path is None:
        import httpx

        headers = {"Authorization": f"Bearer {config.engine_api_key}"} if config.engine_api_key else {}
        info = httpx.get(config.engine_url.rstrip("/") + "/get_model_info", headers=headers, timeout=30).json()
        path = info.get("tokenizer_path") or info["model_path"]
    return AutoTokenizer.from_pretrained(path)


_LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def resolve_log_level(configured: str, environ=None) -> tuple[int, str]:
    """The proxy's log level and where it came from: `OPENCLAW_DEBUG` (truthy: DEBUG), else `ROLLOUT_LOG_LEVEL`,
    else the `log_level` setting. The environment wins over the setting when it is set (not blank)."""
    environ = os.environ if environ is None else environ
    debug = (environ.get("OPENCLAW_DEBUG") or "").strip().lower()
    if debug in ("1", "true", "yes", "on"):
        return logging.DEBUG, "OPENCLAW_DEBUG"
    for origin, value in (("ROLLOUT_LOG_LEVEL", environ.get("ROLLOUT_LOG_LEVEL")), ("log_level", configured)):
        value = (value or "").strip().upper()
        if not value:
            continue
        value = "WARNING" if value == "WARN" else value
        if value not in _LOG_LEVELS:
            raise ValueError(f"{origin}: {value!r} is not a log level ({', '.join(_LOG_LEVELS)})")
        return getattr(logging, value), origin
    return logging.INFO, "log_level"


def main(argv: list[str] | None = None) -> int:
    """`serve [--settings FILE] [flags]`: the settings of `slime.conversation.settings`, flags over the file."""
    try:
        config = from_cli(argv)
        config.engine_url = (config.engine_url or "").rstrip("/")
        config.check()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        level, origin = resolve_log_level(config.log_level)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # the proxy's own loggers (slime.*) at that level; everything else (aiohttp, httpx, ...) no chattier than INFO
    logging.basicConfig(level=max(level, logging.INFO), format="[%(asctime)s] %(name)s: %(message)s",
                        stream=sys.stdout)
    logging.getLogger("slime").setLevel(level)
    if origin != "log_level":
        log.info("log level %s (from $%s)", logging.getLevelName(level), origin)
    from slime.utils.hooks import add_method_dirs_to_path

    add_method_dirs_to_path(config.python_path)  # plugins (methods, judges) from the trainer's method folders
    try:
        evaluator = build_evaluator(config)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import uvicorn

    log.info("conversation proxy on http://%s:%d -> engine %s, method %s, judge %s%s, store %s%s", config.proxy_host,
             config.proxy_port, config.engine_url, evaluator.name, getattr(evaluator.judge, "name", "-"),
             f", hint judge {evaluator.hint_judge.name}" if evaluator.hint_judge is not None else "",
             config.conversation_store, ", API key required" if config.api_key else "")
    uvicorn.run(create_app(config, evaluator), host=config.proxy_host, port=config.proxy_port, log_level="warning",
                timeout_graceful_shutdown=5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
