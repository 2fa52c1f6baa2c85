"""The official `openai` Python client against a real engine process.

Two engines: the module-scoped tiny random model (`engine_server`) for the protocol surface, and the tool
model (helpers.tool_model, memorised get_weather conversation) for tool-call round trips, plus a request
shaped exactly like the one the OpenClaw gateway sends.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import pytest
from openai import BadRequestError, OpenAI

from helpers.tool_model import FINAL_ANSWER, TOOL_ARGUMENTS, TOOL_NAME, TOOL_RESULT, TOOLS, turn1_messages

# A request the real OpenClaw client sent (tests/fixtures/openclaw_capture, see ../shared/reference/openclaw_client.md)
OPENCLAW_CAPTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "openclaw_capture"
                    / "03_local_tool_result_followup.json")

PROMPT = [{"role": "user", "content": "Write a short Python function that adds two numbers."}]


@pytest.fixture(scope="module")
def client(engine_server):
    with OpenAI(base_url=engine_server.url + "/v1", api_key="none", max_retries=0, timeout=120) as c:
        yield c


@pytest.fixture(scope="module")
def model_name(client):
    return client.models.list().data[0].id


@pytest.fixture(scope="module")
def tool_engine(tool_model_path, tmp_path_factory):
    from slime.engine.launch import EngineProcess

    log = tmp_path_factory.mktemp("tool-engine") / "engine.log"
    with EngineProcess(tool_model_path, log_path=log, ready_timeout=120) as server:
        yield server


@pytest.fixture(scope="module")
def tool_client(tool_engine):
    with OpenAI(base_url=tool_engine.url + "/v1", api_key="none", max_retries=0, timeout=120) as c:
        yield c


# --------------------------------------------------------------------------------------------------
# Plain chat on the tiny model
# --------------------------------------------------------------------------------------------------


def test_models_list(client, engine_server, tiny_model_path):
    models = client.models.list()
    assert len(models.data) == 1
    model = models.data[0]
    assert model.object == "model"
    assert model.id == Path(tiny_model_path).name
    assert model.owned_by
    info = httpx.get(engine_server.url + "/get_model_info").json()
    assert model.id == info["served_model_name"]


def test_non_streaming_chat_with_token_ids(client, model_name):
    resp = client.chat.completions.create(
        model=model_name, messages=PROMPT, temperature=0, max_tokens=12, extra_body={"return_token_ids": True}
    )
    assert resp.object == "chat.completion"
    assert resp.id
    assert len(resp.choices) == 1
    choice = resp.choices[0]
    assert choice.index == 0
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")

    prompt_ids = resp.model_extra["prompt_token_ids"]
    token_ids = choice.model_extra["token_ids"]
    assert all(isinstance(t, int) for t in prompt_ids + token_ids)
    assert resp.usage.prompt_tokens == len(prompt_ids)
    assert resp.usage.completion_tokens == len(token_ids)
    assert resp.usage.total_tokens == len(prompt_ids) + len(token_ids)
    if choice.finish_reason == "length":
        assert len(token_ids) == 12
    else:
        assert len(token_ids) <= 12
    # the same fields are in model_dump()
    dumped = resp.model_dump()
    assert dumped["prompt_token_ids"] == prompt_ids
    assert dumped["choices"][0]["token_ids"] == token_ids


def test_token_ids_match_generate(client, model_name, engine_client, tiny_model):
    _, tokenizer = tiny_model
    resp = client.chat.completions.create(
        model=model_name, messages=PROMPT, temperature=0, max_tokens=16, extra_body={"return_token_ids": True}
    )
    prompt_ids = resp.model_extra["prompt_token_ids"]
    token_ids = resp.choices[0].model_extra["token_ids"]
    # the prompt is the chat template's rendering, tokenised without extra specials
    rendered = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    assert prompt_ids == tokenizer.encode(rendered, add_special_tokens=False)

    out = engine_client.generate(input_ids=prompt_ids, sampling_params={"temperature": 0, "max_new_tokens": 16})
    assert out["output_ids"] == token_ids
    assert out["text"] == resp.choices[0].message.content
    expected_reason = {"stop": "stop", "length": "length"}[resp.choices[0].finish_reason]
    assert out["meta_info"]["finish_reason"]["type"] == expected_reason
    assert resp.choices[0].message.content == tokenizer.decode(token_ids, skip_special_tokens=True)


def test_logprobs(client, model_name):
    resp = client.chat.completions.create(
        model=model_name, messages=PROMPT, temperature=0, max_tokens=8, logprobs=True, top_logprobs=2,
        extra_body={"return_token_ids": True},
    )
    choice = resp.choices[0]
    entries = choice.logprobs.content
    assert len(entries) == resp.usage.completion_tokens == len(choice.model_extra["token_ids"])
    for entry in entries:
        assert isinstance(entry.token, str)
        assert entry.logprob <= 0.0
        assert entry.bytes == list(entry.token.encode("utf-8"))
        assert len(entry.top_logprobs) == 2
        first, second = entry.top_logprobs
        assert first.logprob >= second.logprob
        for top in entry.top_logprobs:
            assert top.bytes == list(top.token.encode("utf-8"))
            assert top.logprob <= 0.0
        # greedy: the chosen token is the most likely one
        assert first.token == entry.token
        assert first.logprob == pytest.approx(entry.logprob, abs=1e-6)
    if choice.finish_reason == "length":  # no end-of-turn token, whose text the content skips
        assert "".join(e.token for e in entries) == choice.message.content


def test_n_choices(client, model_name):
    resp = client.chat.completions.create(
        model=model_name, messages=PROMPT, n=2, temperature=1.0, max_tokens=8, seed=11,
        extra_body={"return_token_ids": True},
    )
    assert [c.index for c in resp.choices] == [0, 1]
    assert all(isinstance(c.message.content, str) for c in resp.choices)
    lengths = [len(c.model_extra["token_ids"]) for c in resp.choices]
    assert resp.usage.completion_tokens == sum(lengths)
    assert resp.usage.prompt_tokens == len(resp.model_extra["prompt_token_ids"])
    # the two samples of one seeded request are different draws (seed, seed + 1)
    assert resp.choices[0].model_extra["token_ids"] != resp.choices[1].model_extra["token_ids"]


def test_seed_reproducible(client, model_name):
    def sample(seed):
        resp = client.chat.completions.create(
            model=model_name, messages=PROMPT, temperature=1.0, max_tokens=16, seed=seed,
            extra_body={"return_token_ids": True},
        )
        return resp.choices[0].model_extra["token_ids"], resp.choices[0].message.content

    first = sample(1234)
    assert sample(1234) == first
    others = {tuple(sample(seed)[0]) for seed in (1, 2, 3)}
    assert any(ids != tuple(first[0]) for ids in others), "different seeds should not all give the same sample"


def _stream(client, model_name, **kwargs):
    return list(client.chat.completions.create(
        model=model_name, messages=PROMPT, stream=True, stream_options={"include_usage": True}, **kwargs
    ))


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "seed": 99}], ids=["greedy", "seeded"])
def test_streaming_matches_non_streaming(client, model_name, sampling):
    whole = client.chat.completions.create(model=model_name, messages=PROMPT, max_tokens=24, **sampling)
    chunks = _stream(client, model_name, max_tokens=24, **sampling)

    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert len({c.id for c in chunks}) == 1
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == whole.choices[0].message.content

    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
    assert len(finishing) == 1
    assert finishing[0].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.usage is None for c in chunks[:-1])

    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.total_tokens == whole.usage.total_tokens


def test_streaming_logprobs_and_token_ids(client, model_name):
    kwargs = dict(temperature=1.0, seed=5, max_tokens=12, logprobs=True, top_logprobs=2,
                  extra_body={"return_token_ids": True})
    whole = client.chat.completions.create(model=model_name, messages=PROMPT, **kwargs)
    chunks = _stream(client, model_name, **kwargs)
    assert chunks[0].model_extra["prompt_token_ids"] == whole.model_extra["prompt_token_ids"]
    token_ids = [t for c in chunks if c.choices for t in c.choices[0].model_extra.get("token_ids") or []]
    assert token_ids == whole.choices[0].model_extra["token_ids"]
    entries = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    expected = whole.choices[0].logprobs.content
    assert [e.token for e in entries] == [e.token for e in expected]
    assert [e.logprob for e in entries] == pytest.approx([e.logprob for e in expected], abs=1e-5)
    assert all(len(e.top_logprobs) == 2 for e in entries)


def test_streaming_without_usage_has_no_usage_chunk(client, model_name):
    chunks = list(client.chat.completions.create(
        model=model_name, messages=PROMPT, stream=True, temperature=0, max_tokens=6
    ))
    assert all(c.choices for c in chunks)
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


# --------------------------------------------------------------------------------------------------
# Tool calls on the tool model
# --------------------------------------------------------------------------------------------------


def test_tool_round_trip(tool_client):
    first = tool_client.chat.completions.create(
        model="tool-model", messages=turn1_messages(), tools=TOOLS, temperature=0, max_tokens=64
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content in (None, "")
    assert len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert call.id
    assert call.function.name == TOOL_NAME
    assert json.loads(call.function.arguments) == TOOL_ARGUMENTS

    # the usual client loop: append the assistant message object as returned, then the tool result
    messages = turn1_messages() + [
        choice.message,
        {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT},
    ]
    second = tool_client.chat.completions.create(
        model="tool-model", messages=messages, tools=TOOLS, temperature=0, max_tokens=64
    )
    assert second.choices[0].message.content == FINAL_ANSWER
    assert second.choices[0].message.tool_calls in (None, [])
    assert second.choices[0].finish_reason == "stop"


def test_tool_round_trip_with_plain_dicts(tool_client):
    """Turn 2 with the assistant message rebuilt as a plain dict (content null, as OpenClaw sends it)."""
    first = tool_client.chat.completions.create(
        model="tool-model", messages=turn1_messages(), tools=TOOLS, temperature=0, max_tokens=64
    )
    call = first.choices[0].message.tool_calls[0]
    messages = turn1_messages() + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT},
    ]
    second = tool_client.chat.completions.create(
        model="tool-model", messages=messages, tools=TOOLS, temperature=0, max_tokens=64
    )
    assert second.choices[0].message.content == FINAL_ANSWER
    assert second.choices[0].finish_reason == "stop"


def test_tool_call_streamed(tool_client):
    chunks = list(tool_client.chat.completions.create(
        model="tool-model", messages=turn1_messages(), tools=TOOLS, temperature=0, max_tokens=64,
        stream=True, stream_options={"include_usage": True},
    ))
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = "".join(d.content or "" for d in deltas)
    assert "<tool_call>" not in content and "</tool_call>" not in content and TOOL_NAME not in content
    assert content.strip() == ""

    calls = [tc for d in deltas for tc in (d.tool_calls or [])]
    assert len(calls) >= 1
    assert {tc.index for tc in calls} == {0}
    ids = [tc.id for tc in calls if tc.id]
    assert len(set(ids)) == 1
    name = "".join(tc.function.name or "" for tc in calls if tc.function)
    arguments = "".join(tc.function.arguments or "" for tc in calls if tc.function)
    assert name == TOOL_NAME
    assert json.loads(arguments) == TOOL_ARGUMENTS

    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
    assert len(finishing) == 1
    assert finishing[0].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0


def test_tool_choice_none_returns_raw_text(tool_client):
    resp = tool_client.chat.completions.create(
        model="tool-model", messages=turn1_messages(), tools=TOOLS, tool_choice="none", temperature=0, max_tokens=64
    )
    # tool_choice "none" hides the tools from the prompt, so the memorised answer is not guaranteed;
    # but nothing may be parsed as a tool call
    assert resp.choices[0].message.tool_calls in (None, [])
    assert resp.choices[0].finish_reason in ("stop", "length")


# --------------------------------------------------------------------------------------------------
# A request shaped like the real OpenClaw gateway's
# --------------------------------------------------------------------------------------------------


def _openclaw_body() -> dict:
    body = json.loads(OPENCLAW_CAPTURE.read_text())["body"]
    assert body["stream"] is True and body["tool_choice"] == "auto" and body["max_completion_tokens"] == 4096
    assert body["stream_options"] == {"include_usage": True}
    assert any(isinstance(m.get("content"), list) for m in body["messages"] if m["role"] == "user")
    assert any(m["role"] == "assistant" and m["content"] is None and m.get("tool_calls") for m in body["messages"])
    body["max_completion_tokens"] = 16
    return body


def _prompt_tokens(tokenizer, body: dict) -> int:
    """How many tokens the engine's rendering of this request's prompt has."""
    from slime.engine.chat_parsing import normalize_messages

    text = tokenizer.apply_chat_template(
        normalize_messages(body["messages"]), tools=body.get("tools") or None, add_generation_prompt=True,
        tokenize=False,
    )
    return len(tokenizer.encode(text, add_special_tokens=False))


def _post_stream(url: str, body: dict) -> tuple[int, list[str], str]:
    """(status, data payloads, raw error body) of a streamed chat request."""
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120,
                      headers={"Authorization": "Bearer sk-capture-local"}) as response:
        if response.status_code != 200:
            return response.status_code, [], response.read().decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")]
        return 200, data, ""


def _check_openclaw(engine_url: str, tokenizer, body: dict, context: int) -> str:
    """Send `body`; assert a clean stream if its prompt fits the context, else a 400 naming the context."""
    n = _prompt_tokens(tokenizer, body)
    status, data, error = _post_stream(engine_url, body)
    if n >= context:
        assert status == 400, f"{n}-token prompt in a {context}-token context: expected 400, got {status}"
        err = json.loads(error)["error"]
        assert err["code"] == 400 and err["type"] == "invalid_request_error"
        assert err["param"] == "messages"
        assert "context" in err["message"] and str(context) in err["message"] and str(n) in err["message"]
        return "rejected"
    assert status == 200, error
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert not any("error" in c for c in chunks), chunks
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    finishing = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] is not None]
    assert len(finishing) == 1
    assert finishing[0]["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    assert usage["prompt_tokens"] == n
    assert 1 <= usage["completion_tokens"] <= 16
    return "streamed"


def test_openclaw_request_full_system_prompt(engine_server, tiny_model):
    _, tokenizer = tiny_model
    context = httpx.get(engine_server.url + "/get_model_info").json()["context_length"]
    body = _openclaw_body()
    outcome = _check_openclaw(engine_server.url, tokenizer, body, context)
    # the captured prompt (long system prompt + 12 tool schemas) is ~4.7k tokens with the tiny tokenizer
    assert outcome == ("rejected" if _prompt_tokens(tokenizer, body) >= context else "streamed")


def test_openclaw_request_too_long_via_openai_client(engine_server, tiny_model):
    """The same rejection as the official client sees it: a BadRequestError naming the context."""
    _, tokenizer = tiny_model
    context = httpx.get(engine_server.url + "/get_model_info").json()["context_length"]
    body = _openclaw_body()
    if _prompt_tokens(tokenizer, body) < context:
        pytest.skip("the captured prompt fits this model's context")
    with OpenAI(base_url=engine_server.url + "/v1", api_key="sk-capture-local", max_retries=0) as c:
        with pytest.raises(BadRequestError) as info:
            list(c.chat.completions.create(**body))
    assert "context" in str(info.value)


def test_openclaw_request_trimmed_streams_to_done(engine_server, tiny_model):
    _, tokenizer = tiny_model
    context = httpx.get(engine_server.url + "/get_model_info").json()["context_length"]
    body = _openclaw_body()
    body["messages"][0]["content"] = body["messages"][0]["content"][:500]
    trimmed_system_tokens = _prompt_tokens(tokenizer, body)
    # Cutting the system prompt alone is not enough here: the 12 tool schemas are ~10k characters.
    _check_openclaw(engine_server.url, tokenizer, body, context)

    # Also keep only the tools the conversation used, so the request fits and must stream to [DONE].
    used = {call["function"]["name"] for m in body["messages"] for call in m.get("tool_calls") or []}
    slim = copy.deepcopy(body)
    slim["tools"] = [t for t in body["tools"] if t["function"]["name"] in used]
    assert slim["tools"], "the capture's conversation calls at least one of its tools"
    n = _prompt_tokens(tokenizer, slim)
    assert n < context, f"trimmed request is still {n} tokens (system-trimmed only: {trimmed_system_tokens})"
    assert _check_openclaw(engine_server.url, tokenizer, slim, context) == "streamed"
