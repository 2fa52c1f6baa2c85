import asyncio
import json
import socket
import threading
import time
from collections import Counter

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from slime.engine.client import (
    SSE_DONE,
    AsyncEngineClient,
    EngineClient,
    EngineError,
    RetryPolicy,
    ScoreResult,
    build_generate_body,
    error_from_response,
    parse_retry_after,
    parse_score,
    parse_sse_line,
    retry_delay,
    should_retry,
)

FAST = RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)


# --------------------------------------------------------------------------------------------------
# Retry decisions
# --------------------------------------------------------------------------------------------------

REQ = httpx.Request("POST", "http://engine/generate")


@pytest.mark.parametrize(
    "failure, idempotent, expected",
    [
        # never reached the engine: always safe
        (httpx.ConnectError("refused", request=REQ), False, True),
        (httpx.ConnectTimeout("slow", request=REQ), False, True),
        (httpx.PoolTimeout("busy", request=REQ), False, True),
        # refused before any work: always safe
        (429, False, True),
        (503, False, True),
        (429, True, True),
        (503, True, True),
        # may have been delivered: only for calls that change nothing
        (httpx.ReadTimeout("slow", request=REQ), True, True),
        (httpx.ReadTimeout("slow", request=REQ), False, False),
        (httpx.RemoteProtocolError("dropped", request=REQ), True, True),
        (httpx.RemoteProtocolError("dropped", request=REQ), False, False),
        (httpx.ReadError("reset", request=REQ), False, False),
        (502, True, True),
        (502, False, False),
        (504, True, True),
        (504, False, False),
        # final
        (400, True, False),
        (401, True, False),
        (404, True, False),
        (422, True, False),
        (500, True, False),
        (ValueError("not a transport error"), True, False),
        (httpx.UnsupportedProtocol("ftp", request=REQ), True, False),
    ],
)
def test_should_retry(failure, idempotent, expected):
    assert should_retry(failure, idempotent) is expected


def test_should_retry_reads_engine_errors():
    assert should_retry(EngineError("busy", status_code=503), idempotent=False)
    assert not should_retry(EngineError("bad", status_code=400), idempotent=True)
    assert not should_retry(EngineError("garbage", error_type="invalid_response"), idempotent=True)
    wrapped = EngineError("refused")
    wrapped.__cause__ = httpx.ConnectError("refused")
    assert should_retry(wrapped, idempotent=False) and wrapped.retryable
    assert EngineError("busy", status_code=429).retryable
    assert not EngineError("gateway", status_code=502).retryable


def test_retry_delay_backoff_retry_after_and_exhaustion():
    policy = RetryPolicy(max_attempts=5, backoff_initial=0.2, backoff_max=1.0)
    for attempt, ceiling in [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0)]:
        for _ in range(20):
            assert ceiling / 2 <= retry_delay(policy, attempt, 503, idempotent=False) <= ceiling
    assert retry_delay(policy, 5, 503, idempotent=False) is None  # attempts exhausted
    assert retry_delay(policy, 1, 400, idempotent=True) is None
    assert retry_delay(policy, 1, httpx.ReadTimeout("x"), idempotent=False) is None
    assert retry_delay(policy, 1, EngineError("busy", status_code=503, retry_after=7.0), idempotent=False) == 7.0
    assert retry_delay(policy, 1, EngineError("busy", status_code=429, retry_after=120.0), idempotent=False) == 30.0
    assert retry_delay(RetryPolicy(max_attempts=1), 1, 503, idempotent=True) is None
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


def test_parse_retry_after():
    assert parse_retry_after(None) is None
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("inf") is None
    future = time.time() + 20
    http_date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(future))
    assert 15 <= parse_retry_after(http_date) <= 21
    assert parse_retry_after("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


def test_error_from_openai_shape():
    body = {"error": {"message": "prompt too long", "type": "invalid_request_error", "param": "input_ids", "code": 400}}
    err = error_from_response(httpx.Response(400, json=body), "POST /generate")
    assert (err.status_code, err.message, err.type, err.param, err.code) == (
        400, "prompt too long", "invalid_request_error", "input_ids", 400)
    assert err.body == body and not err.retryable
    assert "POST /generate" in str(err) and "HTTP 400" in str(err) and "prompt too long" in str(err)


def test_error_from_other_shapes():
    err = error_from_response(httpx.Response(503, headers={"Retry-After": "2"}, json={"error": {"message": "busy"}}))
    assert err.retry_after == 2.0 and err.retryable and err.message == "busy"
    err = error_from_response(httpx.Response(400, json={"success": False, "message": "no such path"}))
    assert err.message == "no such path" and err.type is None
    err = error_from_response(httpx.Response(422, json={"detail": "bad field"}))
    assert err.message == "bad field"
    err = error_from_response(httpx.Response(502, text="Bad Gateway from proxy"))
    assert err.message == "Bad Gateway from proxy" and err.body == "Bad Gateway from proxy" and not err.retryable
    err = error_from_response(httpx.Response(500, content=b""))
    assert err.message == "Internal Server Error"


# --------------------------------------------------------------------------------------------------
# Request bodies
# --------------------------------------------------------------------------------------------------


def test_build_generate_body():
    body = build_generate_body(input_ids=[1, 2], sampling_params={"max_new_tokens": 3},
                               extra={"return_text_in_logprobs": True})
    assert body == {
        "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}, "return_logprob": False,
        "logprob_start_len": -1, "top_logprobs_num": 0, "stream": False, "return_text_in_logprobs": True,
    }
    assert build_generate_body(text=["a", "b"])["text"] == ["a", "b"]
    with pytest.raises(ValueError, match="exactly one"):
        build_generate_body()
    with pytest.raises(ValueError, match="exactly one"):
        build_generate_body(input_ids=[1], text="a")
    with pytest.raises(ValueError, match="generate_stream"):
        build_generate_body(input_ids=[1], extra={"stream": True})


def test_score_rejects_empty_prompt_without_calling():
    with EngineClient("http://127.0.0.1:9") as client:  # nothing listens there; no request may be made
        with pytest.raises(ValueError, match="first position"):
            client.score([], [1, 2])
        with pytest.raises(ValueError):
            client.score([1], [])


# --------------------------------------------------------------------------------------------------
# SSE lines
# --------------------------------------------------------------------------------------------------


def test_parse_sse_line():
    assert parse_sse_line('data: {"text": "hi"}') == {"text": "hi"}
    assert parse_sse_line('data:{"text": "hi"}\r\n') == {"text": "hi"}
    assert parse_sse_line("data: [DONE]") is SSE_DONE
    assert parse_sse_line("") is None
    assert parse_sse_line(": keep-alive") is None
    assert parse_sse_line("event: message") is None
    with pytest.raises(EngineError, match="not JSON"):
        parse_sse_line("data: {broken")
    with pytest.raises(EngineError, match="unexpected line"):
        parse_sse_line('{"text": "not sse"}')
    with pytest.raises(EngineError, match="out of memory") as info:
        parse_sse_line('data: {"error": {"message": "out of memory", "type": "server_error", "code": 500}}')
    assert info.value.type == "server_error" and info.value.code == 500 and not info.value.retryable


# --------------------------------------------------------------------------------------------------
# Score parsing: one logprob per response token, aligned by position
# --------------------------------------------------------------------------------------------------


def score_payload(entries, top=None, version="7"):
    meta = {"input_token_logprobs": entries, "weight_version": version}
    if top is not None:
        meta["input_top_logprobs"] = top
    return {"text": "", "output_ids": [], "meta_info": meta}


def test_parse_score_aligned():
    payload = score_payload(
        [[-0.5, 11, None], [-1.25, 12, "x"], [0.0, 13, None]],
        top=[[[-0.1, 5, None], [-0.5, 11, None]], [[-1.25, 12, None]], [[0.0, 13, None]]],
    )
    result = parse_score(payload, [11, 12, 13], top_logprobs_num=2)
    assert result == ScoreResult(
        logprobs=[-0.5, -1.25, 0.0],
        top_logprobs=[[(-0.1, 5), (-0.5, 11)], [(-1.25, 12)], [(0.0, 13)]],
        weight_version="7",
    )
    assert parse_score(payload, [11, 12, 13]).top_logprobs is None


def test_parse_score_rejects_off_by_one():
    # The engine started one position early: an extra leading entry for the last prompt token.
    shifted = score_payload([[-2.0, 10, None], [-0.5, 11, None], [-1.25, 12, None], [0.0, 13, None]])
    with pytest.raises(EngineError, match="4 input logprobs for 3 response tokens"):
        parse_score(shifted, [11, 12, 13])
    # Same count but shifted by one: caught by the token ids.
    shifted = score_payload([[-2.0, 10, None], [-0.5, 11, None], [-1.25, 12, None]])
    with pytest.raises(EngineError, match="mismatch at response position 0: engine scored 10, expected 11"):
        parse_score(shifted, [11, 12, 13])
    dropped = score_payload([[-1.25, 12, None], [0.0, 13, None]])
    with pytest.raises(EngineError, match="2 input logprobs for 3"):
        parse_score(dropped, [11, 12, 13])


def test_parse_score_rejects_malformed():
    with pytest.raises(EngineError, match="missing logprob at response position 0"):
        parse_score(score_payload([[None, 11, None]]), [11])
    with pytest.raises(EngineError, match="one result object"):
        parse_score([score_payload([[-1.0, 11, None]])], [11])
    with pytest.raises(EngineError, match="no meta_info.input_token_logprobs"):
        parse_score({"text": "", "meta_info": {}}, [11])
    with pytest.raises(EngineError, match="malformed"):
        parse_score(score_payload([[-1.0]]), [11])
    with pytest.raises(EngineError, match="input_top_logprobs"):
        parse_score(score_payload([[-1.0, 11, None]], top=[]), [11], top_logprobs_num=1)
    err = pytest.raises(EngineError, parse_score, score_payload([[-1.0, 12, None]]), [11]).value
    assert err.type == "invalid_response" and not err.retryable


# --------------------------------------------------------------------------------------------------
# A fake engine served by uvicorn on a free local port
# --------------------------------------------------------------------------------------------------


class FakeEngine:
    def __init__(self):
        self.reset()

    def reset(self):
        self.calls = Counter()
        self.refusals = {}  # path -> [(status, retry_after or None), ...] answered before any work
        self.delays = {}  # path -> [seconds, ...] slept (per call) before answering
        self.api_key = None
        self.auth_seen = []
        self.version = 0
        self.score_shift = 0
        self.not_ready_probes = 0
        self.stream_error = False


def logprob_of(position, token):
    return -0.01 * position - 0.001 * token


def make_app(engine: FakeEngine) -> FastAPI:
    app = FastAPI()

    async def gate(request: Request, path: str):
        """Count the call, check auth, apply scripted refusals and delays. Returns a response to send instead."""
        engine.calls[path] += 1
        engine.auth_seen.append(request.headers.get("authorization"))
        if engine.api_key and request.headers.get("authorization") != f"Bearer {engine.api_key}":
            return JSONResponse({"error": {"message": "bad key", "type": "auth_error", "param": None, "code": 401}},
                                status_code=401)
        if engine.refusals.get(path):
            status, retry_after = engine.refusals[path].pop(0)
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            message = "overloaded" if status in (429, 503) else "rejected"
            return JSONResponse({"error": {"message": message, "type": "engine_error", "param": None,
                                           "code": status}}, status_code=status, headers=headers)
        if engine.delays.get(path):
            await asyncio.sleep(engine.delays[path].pop(0))
        return None

    def result(body):
        ids = body["input_ids"]
        params = body.get("sampling_params", {})
        meta = {"id": "r1", "prompt_tokens": len(ids), "cached_tokens": 0, "weight_version": str(engine.version)}
        if params.get("max_new_tokens") == 0 and body.get("return_logprob"):
            start = body["logprob_start_len"] - engine.score_shift
            meta["input_token_logprobs"] = [
                [None if p == 0 else logprob_of(p, ids[p]), ids[p], None] for p in range(start, len(ids))]
            if body.get("top_logprobs_num"):
                meta["input_top_logprobs"] = [[[logprob_of(p, ids[p]), ids[p], None]] for p in range(start, len(ids))]
            out = []
        else:
            out = [ids[-1] + 1 + i for i in range(params.get("max_new_tokens", 2))]
        meta.update(completion_tokens=len(out), finish_reason={"type": "length", "matched": None})
        return {"text": " ".join(map(str, out)), "output_ids": out, "meta_info": meta}

    @app.post("/generate")
    async def generate(request: Request):
        if (refused := await gate(request, "/generate")) is not None:
            return refused
        body = await request.json()
        if not body.get("stream"):
            return result(body)
        final = result(body)

        async def events():
            for n in range(1, len(final["output_ids"]) + 1):
                ids = final["output_ids"][:n]
                yield "data: " + json.dumps({"text": " ".join(map(str, ids)), "output_ids": ids,
                                             "meta_info": final["meta_info"]}) + "\n\n"
            if engine.stream_error:
                yield 'data: {"error": {"message": "engine crashed", "type": "server_error", "code": 500}}\n\n'
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        if (refused := await gate(request, "/v1/chat/completions")) is not None:
            return refused
        body = await request.json()
        if not body.get("stream"):
            return {"id": "c1", "object": "chat.completion", "weight_version": str(engine.version),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                 "finish_reason": "stop", "token_ids": [5, 6]}],
                    "prompt_token_ids": [1, 2, 3]}

        async def chunks():
            for piece in ["h", "i"]:
                yield "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                             "choices": [{"index": 0, "delta": {"content": piece}}]}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    @app.post("/update_weights_from_disk")
    async def update_weights(request: Request):
        if (refused := await gate(request, "/update_weights_from_disk")) is not None:
            return refused
        body = await request.json()
        if body["model_path"] == "/missing":
            return JSONResponse({"success": False, "message": "no checkpoint at /missing"}, status_code=400)
        if body["model_path"] == "/soft-fail":
            return {"success": False, "message": "shape mismatch", "weight_version": str(engine.version)}
        engine.version += 1
        return {"success": True, "message": "ok", "weight_version": str(engine.version)}

    @app.post("/flush_cache")
    async def flush_cache(request: Request):
        return await gate(request, "/flush_cache") or {"message": "flushed"}

    @app.get("/health")
    async def health(request: Request):
        return await gate(request, "/health") or {}

    @app.get("/health_generate")
    async def health_generate(request: Request):
        if (refused := await gate(request, "/health_generate")) is not None:
            return refused
        if engine.not_ready_probes > 0:
            engine.not_ready_probes -= 1
            return JSONResponse({"error": {"message": "warming up"}}, status_code=503)
        return {}

    @app.get("/get_weight_version")
    async def get_weight_version(request: Request):
        return await gate(request, "/get_weight_version") or {"weight_version": str(engine.version)}

    @app.get("/v1/models")
    async def models(request: Request):
        return await gate(request, "/v1/models") or {"object": "list", "data": [{"id": "tiny", "object": "model"}]}

    @app.get("/get_model_info")
    async def model_info(request: Request):
        return await gate(request, "/get_model_info") or {"model_path": "tiny", "is_generation": True}

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    engine = FakeEngine()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(make_app(engine), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while not uv.started:
        assert time.monotonic() < deadline, "fake engine did not start"
        time.sleep(0.01)
    yield engine, f"http://127.0.0.1:{port}"
    uv.should_exit = True
    thread.join(5)
    sock.close()


@pytest.fixture
def engine(server):
    server[0].reset()
    return server


# --------------------------------------------------------------------------------------------------
# Transports against the fake engine
# --------------------------------------------------------------------------------------------------


def test_generate_sync(engine):
    fake, url = engine
    with EngineClient(url, retry=FAST) as client:
        out = client.generate(input_ids=[1, 2, 3], sampling_params={"max_new_tokens": 2})
        assert out["output_ids"] == [4, 5] and out["meta_info"]["finish_reason"]["type"] == "length"
        assert client.health() and client.health_generate()
        assert client.models()["data"][0]["id"] == "tiny"
        assert client.model_info()["is_generation"] is True
        assert client.flush_cache() == {"message": "flushed"}
        assert client.weight_version() == "0"
    assert fake.calls["/generate"] == 1


def test_async_retries_503_honouring_retry_after(engine):
    fake, url = engine
    fake.refusals["/generate"] = [(503, "1")]

    async def main():
        async with AsyncEngineClient(url, retry=FAST) as client:
            start = time.monotonic()
            out = await client.generate(input_ids=[7], sampling_params={"max_new_tokens": 1})
            return out, time.monotonic() - start

    out, elapsed = asyncio.run(main())
    assert out["output_ids"] == [8]
    assert fake.calls["/generate"] == 2
    assert elapsed >= 0.9  # waited for Retry-After, not the 10 ms backoff


def test_sync_retries_429_and_gives_up_after_max_attempts(engine):
    fake, url = engine
    fake.refusals["/generate"] = [(429, "0")] * 5
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError) as info:
            client.generate(input_ids=[1])
    assert info.value.status_code == 429 and info.value.attempts == 3 and info.value.message == "overloaded"
    assert fake.calls["/generate"] == 3


def test_other_4xx_not_retried(engine):
    fake, url = engine
    fake.refusals["/generate"] = [(400, None)]
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError) as info:
            client.generate(input_ids=[1])
    assert info.value.status_code == 400 and info.value.type == "engine_error" and info.value.attempts == 1
    assert fake.calls["/generate"] == 1


def test_update_weights_503_is_retried(engine):
    fake, url = engine
    fake.refusals["/update_weights_from_disk"] = [(503, "0")]
    with EngineClient(url, retry=FAST) as client:
        out = client.update_weights_from_disk("/ckpt/step-1", weight_version=1)
    assert out["success"] is True and out["weight_version"] == "1"
    assert fake.calls["/update_weights_from_disk"] == 2 and fake.version == 1


def test_update_weights_read_timeout_not_retried_but_generate_is(engine):
    fake, url = engine
    fake.delays["/update_weights_from_disk"] = [1.0]
    fake.delays["/generate"] = [1.0]
    with EngineClient(url, timeout=httpx.Timeout(0.3, connect=1.0), retry=FAST) as client:
        with pytest.raises(EngineError) as info:
            client.update_weights_from_disk("/ckpt/step-2")
        assert info.value.type == "ReadTimeout" and info.value.status_code is None
        assert isinstance(info.value.__cause__, httpx.ReadTimeout) and not info.value.retryable
        assert fake.calls["/update_weights_from_disk"] == 1
        # generation is side-effect free, so the same failure is retried
        assert client.generate(input_ids=[1], sampling_params={"max_new_tokens": 1})["output_ids"] == [2]
    assert fake.calls["/generate"] == 2


def test_update_weights_502_not_retried(engine):
    fake, url = engine
    fake.refusals["/update_weights_from_disk"] = [(502, None)]
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError) as info:
            client.update_weights_from_disk("/ckpt")
    assert info.value.status_code == 502 and fake.calls["/update_weights_from_disk"] == 1


def test_update_weights_failure_raises(engine):
    fake, url = engine
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError, match="no checkpoint at /missing") as info:
            client.update_weights_from_disk("/missing")
        assert info.value.status_code == 400
        with pytest.raises(EngineError, match="shape mismatch") as info:
            client.update_weights_from_disk("/soft-fail")
        assert info.value.type == "update_failed" and info.value.body["success"] is False
    assert fake.version == 0


def test_connection_refused_retried_then_raises():
    url = f"http://127.0.0.1:{free_port()}"  # bound then released: nothing listens
    with EngineClient(url, retry=FAST) as client:
        for call in (lambda: client.generate(input_ids=[1]), lambda: client.update_weights_from_disk("/ckpt")):
            with pytest.raises(EngineError) as info:
                call()
            assert info.value.attempts == FAST.max_attempts
            assert isinstance(info.value.__cause__, httpx.ConnectError) and info.value.status_code is None
            assert "after 3 attempts" in str(info.value)
        assert client.health() is False
        with pytest.raises(TimeoutError, match=f"engine at {url} not ready"):
            client.wait_until_ready(timeout=0.2, interval=0.05)

    async def main():
        async with AsyncEngineClient(url, retry=FAST) as client:
            assert await client.health() is False
            with pytest.raises(EngineError) as info:
                await client.score([1], [2])
            assert info.value.attempts == FAST.max_attempts

    asyncio.run(main())


def test_wait_until_ready(engine):
    fake, url = engine
    fake.not_ready_probes = 2
    with EngineClient(url, retry=FAST) as client:
        client.wait_until_ready(timeout=5, interval=0.01)
    assert fake.calls["/health_generate"] == 3

    fake.not_ready_probes = 2

    async def main():
        async with AsyncEngineClient(url, retry=FAST) as client:
            await client.wait_until_ready(timeout=5, interval=0.01)

    asyncio.run(main())
    assert fake.calls["/health_generate"] == 6


def test_auth_header(engine):
    fake, url = engine
    fake.api_key = "sekret"
    with EngineClient(url, api_key="sekret", retry=FAST) as client:
        assert client.generate(input_ids=[1], sampling_params={"max_new_tokens": 1})["output_ids"] == [2]
        assert client.health()
    assert fake.auth_seen == ["Bearer sekret", "Bearer sekret"]
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError) as info:
            client.generate(input_ids=[1])
        assert info.value.status_code == 401 and info.value.type == "auth_error"
        assert client.health() is False
    assert fake.calls["/generate"] == 2  # the 401 was not retried


def test_score_sync_and_async(engine):
    fake, url = engine
    prompt, response = [3, 1, 4], [1, 5, 9, 2]
    expected = [logprob_of(3 + i, t) for i, t in enumerate(response)]
    with EngineClient(url, retry=FAST) as client:
        result = client.score(prompt, response, top_logprobs_num=1)
    assert result.logprobs == pytest.approx(expected) and result.weight_version == "0"
    assert [top[0][1] for top in result.top_logprobs] == response

    async def main():
        async with AsyncEngineClient(url, retry=FAST) as client:
            return await client.score(prompt, response, temperature=0.7)

    result = asyncio.run(main())
    assert result.logprobs == pytest.approx(expected) and result.top_logprobs is None


def test_score_detects_engine_off_by_one(engine):
    fake, url = engine
    fake.score_shift = 1
    with EngineClient(url, retry=FAST) as client:
        with pytest.raises(EngineError, match="5 input logprobs for 4 response tokens") as info:
            client.score([3, 1, 4], [1, 5, 9, 2])
    assert info.value.request == "POST /generate"
    assert fake.calls["/generate"] == 1  # a misaligned answer is a bug, not a reason to retry


def test_generate_stream_sync_and_async(engine):
    fake, url = engine
    fake.refusals["/generate"] = [(503, "0")]  # refused before the stream started: retried
    with EngineClient(url, retry=FAST) as client:
        events = list(client.generate_stream(input_ids=[10], sampling_params={"max_new_tokens": 3}))
    assert [e["output_ids"] for e in events] == [[11], [11, 12], [11, 12, 13]]
    assert events[-1]["text"] == "11 12 13"
    assert fake.calls["/generate"] == 2

    async def main():
        async with AsyncEngineClient(url, retry=FAST) as client:
            events = [e async for e in client.generate_stream(input_ids=[10], sampling_params={"max_new_tokens": 2})]
            chunks = [c async for c in client.chat_stream({"messages": [{"role": "user", "content": "hi"}]})]
            return events, chunks

    events, chunks = asyncio.run(main())
    assert [e["output_ids"] for e in events] == [[11], [11, 12]]
    assert "".join(c["choices"][0]["delta"]["content"] for c in chunks) == "hi"


def test_stream_error_event_raises(engine):
    fake, url = engine
    fake.stream_error = True
    with EngineClient(url, retry=FAST) as client:
        stream = client.generate_stream(input_ids=[1], sampling_params={"max_new_tokens": 1})
        assert next(stream)["output_ids"] == [2]
        with pytest.raises(EngineError, match="engine crashed") as info:
            next(stream)
    assert info.value.request == "POST /generate" and info.value.type == "server_error"
    assert fake.calls["/generate"] == 1


def test_chat(engine):
    fake, url = engine
    body = {"messages": [{"role": "user", "content": "hi"}], "return_token_ids": True}
    with EngineClient(url, retry=FAST) as client:
        out = client.chat(body)
        assert out["prompt_token_ids"] == [1, 2, 3] and out["choices"][0]["token_ids"] == [5, 6]
        assert list(client.chat_stream(body))[-1]["choices"][0]["delta"]["content"] == "i"
        with pytest.raises(ValueError, match="chat_stream"):
            client.chat({**body, "stream": True})
    assert "stream" not in body
