"""Bad requests, auth, overload and client disconnects against real engine processes.

Every refused request must get a 4xx with the OpenAI error shape {"error": {message, type, param, code}},
and the engine must keep serving afterwards.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from slime.engine.launch import EngineProcess

VALID = {"text": "still serving?", "sampling_params": {"max_new_tokens": 2, "ignore_eos": True}}


@pytest.fixture(scope="module")
def http(engine_server):
    with httpx.Client(base_url=engine_server.url, timeout=120.0) as client:
        yield client


def assert_error(response: httpx.Response, status: int = 400, param: str | None = "any") -> dict:
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    assert error["code"] == status
    if param != "any":
        assert error["param"] == param, error
    return error


def assert_still_serving(http: httpx.Client):
    response = http.post("/generate", json=VALID)
    assert response.status_code == 200, response.text
    assert response.json()["meta_info"]["completion_tokens"] == 2


def server_load(http: httpx.Client) -> dict:
    return http.get("/get_server_info").json()["load"]


# --------------------------------------------------------------------------------------------------
# malformed /generate requests
# --------------------------------------------------------------------------------------------------


def test_malformed_json(http):
    response = http.post("/generate", content=b'{"text": "hi", ', headers={"content-type": "application/json"})
    assert_error(response)
    response = http.post("/generate", content=b"\xff\xfe not utf-8", headers={"content-type": "application/json"})
    assert_error(response)
    assert_still_serving(http)


@pytest.mark.parametrize("body", [b"[1, 2, 3]", b'"just a string"', b"42", b"null"])
def test_non_object_json_body(http, body):
    assert_error(http.post("/generate", content=body, headers={"content-type": "application/json"}))
    assert_still_serving(http)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"text": "a", "input_ids": [1, 2]}, None),  # both
        ({"sampling_params": {"max_new_tokens": 1}}, None),  # neither
        ({"text": "a", "sampling_params": {"max_new_tokens": 1, "bogus_param": 1}}, "sampling_params.bogus_param"),
        ({"text": "a", "not_a_field": True}, "not_a_field"),
        ({"text": "a", "sampling_params": {"max_new_tokens": "5"}}, "sampling_params.max_new_tokens"),
        ({"text": "a", "sampling_params": {"temperature": "hot"}}, "sampling_params.temperature"),
        ({"input_ids": ["a"]}, "any"),
        ({"text": "a", "sampling_params": {"max_new_tokens": -1}}, "sampling_params.max_new_tokens"),
        ({"input_ids": [1, 2, 10**9]}, "input_ids"),
        ({"input_ids": [1, -5, 2]}, "input_ids"),
        ({"input_ids": [[1, 2], [3, 10**9]]}, "input_ids[1]"),
        ({"input_ids": [1, 2, 3], "return_logprob": True, "logprob_start_len": 4}, "logprob_start_len"),
        ({"text": "a", "sampling_params": {"temperature": 0.5, "top_p": 0.0}}, "sampling_params.top_p"),
        ({"text": "a", "sampling_params": {"frequency_penalty": 0.5}}, "any"),
        ({"text": "a", "sampling_params": {"stop": ""}}, "any"),
        ({"text": "a", "return_logprob": "yes"}, "return_logprob"),
        ({"text": []}, "any"),
    ],
    ids=[
        "both-inputs", "no-input", "unknown-sampling-param", "unknown-top-level-field", "max_new_tokens-string",
        "temperature-string", "input_ids-strings", "negative-max_new_tokens", "token-out-of-vocab",
        "negative-token-id", "token-out-of-vocab-in-batch", "logprob_start_len-past-prompt", "top_p-zero",
        "penalty-unsupported", "empty-stop-string", "return_logprob-string", "empty-text-batch",
    ],
)
def test_invalid_generate_request(http, body, param):
    assert_error(http.post("/generate", json=body), 400, param)
    assert_still_serving(http)


def test_invalid_streaming_request_is_refused_before_streaming(http):
    response = http.post("/generate", json={"text": "a", "stream": True, "sampling_params": {"max_new_tokens": -3}})
    assert_error(response, 400, "sampling_params.max_new_tokens")
    assert_still_serving(http)


@pytest.mark.parametrize(
    "route, body",
    [
        ("/generate", {"text": "a", "sampling_params": {"max_new_tokens": 3, "top_k": 100_000}}),
        ("/generate", {"text": "a", "sampling_params": {"max_new_tokens": 3, "seed": 2**70}}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "max_tokens": 3, "top_k": 100_000}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "max_tokens": 3, "seed": 2**70}),
    ],
    ids=["generate-top_k-beyond-vocab", "generate-seed-beyond-int64", "chat-top_k-beyond-vocab",
         "chat-seed-beyond-int64"],
)
def test_extreme_sampling_values_get_an_answer_and_spare_other_requests(http, engine_server, route, body):
    """Values the validator lets through must either work (SGLang clamps top_k to the vocabulary) or be
    refused with a 4xx; they must neither leave the request unanswered nor fail other users' requests."""
    victim: list[httpx.Response] = []

    def run_victim():
        victim.append(http.post("/generate", json={"text": "innocent bystander",
                                                   "sampling_params": {"max_new_tokens": 300, "ignore_eos": True}}))

    thread = threading.Thread(target=run_victim)
    thread.start()
    deadline = time.monotonic() + 5
    while server_load(http)["running"] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    response = None
    try:
        with httpx.Client(base_url=engine_server.url, timeout=3.0) as client:
            try:
                response = client.post(route, json=body)
            except httpx.ReadTimeout:
                pass
    finally:
        thread.join()
    problems = []
    if response is None:
        problems.append("the request got no answer within 3 s (the engine lost it)")
    if victim[0].status_code != 200:
        problems.append(f"a concurrent request failed: {victim[0].status_code} {victim[0].text}")
    assert not problems, f"{route} with {body}: " + "; ".join(problems)
    if response.status_code != 200:
        assert_error(response, 400)
    assert victim[0].json()["meta_info"]["completion_tokens"] == 300
    assert_still_serving(http)


# --------------------------------------------------------------------------------------------------
# malformed chat requests
# --------------------------------------------------------------------------------------------------

USER = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"messages": [{"role": "wizard", "content": "hi"}]},
        {"messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ]}]},
        {"messages": USER, "tool_choice": "required",
         "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
        {"messages": USER, "logit_bias": {"5": 1.0}},
        {"messages": USER, "max_tokens": -1},
        {"messages": USER, "temperature": "hot"},
        {"messages": "hi"},
        {"messages": USER, "top_logprobs": 2},
    ],
    ids=["empty-messages", "bad-role", "image-part", "tool_choice-required", "logit_bias", "negative-max_tokens",
         "temperature-string", "messages-string", "top_logprobs-without-logprobs"],
)
def test_invalid_chat_request(http, body):
    assert_error(http.post("/v1/chat/completions", json=body), 400)
    assert_still_serving(http)
    response = http.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 2})
    assert response.status_code == 200, response.text


def test_malformed_chat_json(http):
    response = http.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert_error(response)
    assert_still_serving(http)


# --------------------------------------------------------------------------------------------------
# context length
# --------------------------------------------------------------------------------------------------

CONTEXT = 64


@pytest.fixture(scope="module")
def small_context(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine-ctx") / "engine.log"
    with EngineProcess(tiny_model_path, "--context-length", str(CONTEXT), log_path=log, ready_timeout=120) as server:
        with httpx.Client(base_url=server.url, timeout=120.0) as client:
            yield client


def test_prompt_longer_than_context_is_refused(small_context):
    for length in (CONTEXT, CONTEXT + 50):
        response = small_context.post("/generate", json={"input_ids": [5] * length,
                                                         "sampling_params": {"max_new_tokens": 1}})
        assert_error(response, 400, "input_ids")
    long_text = "word " * 200
    assert_error(small_context.post("/generate", json={"text": long_text}), 400, "text")
    assert_error(small_context.post("/v1/chat/completions",
                                    json={"messages": [{"role": "user", "content": long_text}]}), 400, "messages")
    assert_still_serving(small_context)


def test_generation_is_clamped_to_the_context(small_context):
    out = small_context.post("/generate", json={"input_ids": [5] * (CONTEXT - 1),
                                                "sampling_params": {"max_new_tokens": 50, "ignore_eos": True}})
    assert out.status_code == 200, out.text
    meta = out.json()["meta_info"]
    assert meta["completion_tokens"] == 1
    assert meta["finish_reason"]["type"] == "length"


def test_chat_max_tokens_beyond_context_is_clamped(small_context):
    response = small_context.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": 4096,
        "ignore_eos": True,
        "temperature": 0,
    })
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["choices"][0]["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == CONTEXT
    assert usage["total_tokens"] == CONTEXT


# --------------------------------------------------------------------------------------------------
# auth
# --------------------------------------------------------------------------------------------------

API_KEY = "test-secret-key"


@pytest.fixture(scope="module")
def auth_engine(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine-auth") / "engine.log"
    with EngineProcess(tiny_model_path, api_key=API_KEY, log_path=log, ready_timeout=120) as server:
        yield server


def test_api_key_required(auth_engine):
    good = {"Authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=auth_engine.url, timeout=60.0) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY},
                        {"Authorization": f"Bearer {API_KEY}x"}):
            error = assert_error(http.post("/generate", json=VALID, headers=headers), 401)
            assert error["type"] == "authentication_error"
            assert_error(http.get("/v1/models", headers=headers), 401)
            assert_error(http.post("/v1/chat/completions", json={"messages": USER}, headers=headers), 401)
            assert_error(http.get("/get_server_info", headers=headers), 401)
        # a bad body without a key is still refused for the key, not parsed
        assert_error(http.post("/generate", content=b"{oops", headers={"content-type": "application/json"}), 401)

        response = http.post("/generate", json=VALID, headers=good)
        assert response.status_code == 200, response.text
        assert response.json()["meta_info"]["completion_tokens"] == 2
        response = http.get("/v1/models", headers=good)
        assert response.status_code == 200
        assert response.json()["data"][0]["object"] == "model"

        health = http.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"


# --------------------------------------------------------------------------------------------------
# overload
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def overload_engine(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine-overload") / "engine.log"
    with EngineProcess(tiny_model_path, "--max-running-requests", "1", "--max-queued-requests", "1",
                       log_path=log, ready_timeout=120) as server:
        yield server


def test_overload_gets_429_with_retry_after(overload_engine):
    n = 6
    body = {"text": "overload", "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}}
    barrier = threading.Barrier(n)
    loads: list[dict] = []
    stop = threading.Event()

    with httpx.Client(base_url=overload_engine.url, timeout=120.0,
                      limits=httpx.Limits(max_connections=n + 2)) as http:
        def watch():
            while not stop.is_set():
                loads.append(server_load(http))
                time.sleep(0.02)

        def one(_):
            barrier.wait()
            return http.post("/generate", json=body)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(n) as pool:
                responses = list(pool.map(one, range(n)))
        finally:
            stop.set()
            watcher.join()

        statuses = sorted(r.status_code for r in responses)
        assert set(statuses) <= {200, 429}, statuses
        refused = [r for r in responses if r.status_code == 429]
        accepted = [r for r in responses if r.status_code == 200]
        assert refused, f"no request was refused: {statuses}"
        assert accepted, f"no request was accepted: {statuses}"
        assert len(accepted) <= n - 1
        for r in refused:
            error = assert_error(r, 429)
            assert error["type"] == "server_overloaded"
            assert float(r.headers["retry-after"]) > 0
        for r in accepted:
            meta = r.json()["meta_info"]
            assert meta["completion_tokens"] == 200
            assert meta["finish_reason"] == {"type": "length", "length": 200}

        assert loads, "load was never sampled"
        assert max(load["waiting"] for load in loads) <= 1
        assert max(load["running"] + load["prefilling"] for load in loads) <= 1
        final = server_load(http)
        assert final["running"] == final["waiting"] == final["prefilling"] == 0
        response = http.post("/generate", json=VALID)
        assert response.status_code == 200


# --------------------------------------------------------------------------------------------------
# client disconnect
# --------------------------------------------------------------------------------------------------


def wait_idle(http: httpx.Client, timeout: float = 3.0) -> dict:
    deadline = time.monotonic() + timeout
    load = server_load(http)
    while time.monotonic() < deadline:
        load = server_load(http)
        if load["running"] == 0 and load["prefilling"] == 0 and load["waiting"] == 0:
            break
        time.sleep(0.1)
    return load


def generated_tokens(http: httpx.Client) -> int:
    return http.get("/get_server_info").json()["stats"]["generated_tokens"]


def test_streaming_client_disconnect_frees_the_slot(http, engine_server):
    body = {"text": "disconnect me", "stream": True, "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    before = generated_tokens(http)
    with httpx.Client(base_url=engine_server.url, timeout=60.0) as streamer:
        with streamer.stream("POST", "/generate", json=body) as response:
            assert response.status_code == 200
            lines = response.iter_lines()  # keep a reference: closing this iterator closes the connection
            first = next(line for line in lines if line)
            assert first.startswith("data: {")
            deadline = time.monotonic() + 2
            while server_load(http)["running"] != 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server_load(http)["running"] == 1
    # leaving both blocks closed the connection mid-stream
    load = wait_idle(http)
    assert load["running"] == 0, f"generation still running after the client left: {load}"
    assert generated_tokens(http) - before < 1000, "the generation ran (nearly) to its end after the client left"
    assert_still_serving(http)


def test_non_streaming_client_disconnect_frees_the_slot(http, engine_server):
    body = {"text": "disconnect me too", "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}
    before = generated_tokens(http)
    # the client leaves early (the tiny model decodes ~1000 tokens/s here), well before 2000 tokens are done
    with httpx.Client(base_url=engine_server.url, timeout=0.2) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            impatient.post("/generate", json=body)
    load = wait_idle(http)
    assert load["running"] == 0, f"generation still running after the client left: {load}"
    assert generated_tokens(http) - before < 1000, "the generation ran (nearly) to its end after the client left"
    assert_still_serving(http)
