"""The conversation proxy end to end on loopback: real engine (tiny tool model), real proxy process, real store.

Covers the OpenAI surface (stream, non-stream, tools) through the official `openai` client, session and
turn bookkeeping, next states from tool results and user replies, judging, samples built from the exact
sampled ids, feedback, stats, clean 4xx on bad input, engine errors passed through, and /healthz.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from helpers.jobs import poll_until
from helpers.tool_model import TOOLS, USER_QUESTION

openai = pytest.importorskip("openai")

from slime.conversation.launch import ProxyProcess  # noqa: E402
from slime.conversation.store import ConversationStore  # noqa: E402
from slime.engine.launch import EngineProcess  # noqa: E402


@pytest.fixture(scope="module")
def tool_engine(tool_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    # OpenClaw's captured requests are ~4.5k tokens for the tiny tokenizer: beyond the model's 2048 positions
    with EngineProcess(tool_model_path, "--context-length", "8192", log_path=log, ready_timeout=120) as engine:
        yield engine


@pytest.fixture(scope="module")
def proxy(tool_engine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy")
    with ProxyProcess(tool_engine.url, folder / "conversations.db", "--max-body-mb", "1",
                      judge="rules", log_path=folder / "proxy.log") as server:
        yield server


@pytest.fixture()
def store(proxy):
    db = ConversationStore(proxy.store_path)
    yield db
    db.close()


def _client(proxy, session: str | None = None) -> "openai.OpenAI":
    headers = {"X-Session-Id": session} if session else {}
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="unused", default_headers=headers, max_retries=0)


def _wait(predicate, timeout: float = 30.0):
    return poll_until(predicate, timeout)


def _turns(store: ConversationStore, session: str):
    turns, turn_num = [], 1
    while (turn := store.find_turn(session, turn_num)) is not None:
        turns.append(turn)
        turn_num += 1
    return turns


def test_non_stream_returns_session_and_stores_exact_ids(proxy, store):
    client = _client(proxy, "plain-1")
    raw = client.chat.completions.with_raw_response.create(
        model="tiny", messages=[{"role": "user", "content": "Say something."}], max_tokens=12, temperature=0.0)
    body = json.loads(raw.text)
    assert body["session_id"] == "plain-1" and raw.headers["x-session-id"] == "plain-1"
    # the forced extras are not in the client's answer when it did not ask for them
    assert body["choices"][0]["logprobs"] is None and "token_ids" not in body["choices"][0]
    turn = _wait(lambda: store.find_turn("plain-1", 1))
    assert turn.turn_type == "main" and turn.status == "awaiting_next_state"
    assert len(turn.response_ids) == body["usage"]["completion_tokens"] == len(turn.response_logprobs)
    assert len(turn.prompt_ids) == body["usage"]["prompt_tokens"]
    assert turn.weight_version is not None


def test_stream_matches_non_stream_and_ends_with_usage(proxy):
    client = _client(proxy, "stream-1")
    messages = [{"role": "user", "content": "Tell me a story."}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0.0)
    chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=16, temperature=0.0,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert len([c for c in chunks if c.choices]) > 2  # real streaming: more than upstream's 2 fake chunks
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.model_extra.get("session_id") == "stream-1" for c in chunks)


def test_tool_call_then_tool_result_becomes_a_judged_sample(proxy, store):
    client = _client(proxy, "tools-1")
    messages = [{"role": "user", "content": USER_QUESTION}]
    stream = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, temperature=0.0,
                                            max_tokens=64, stream=True)
    calls = {}
    for chunk in stream:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            assert delta.index is not None  # OpenAI deltas carry the index (upstream's did not)
            slot = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
            slot["id"] = delta.id or slot["id"]
            slot["name"] += delta.function.name or ""
            slot["arguments"] += delta.function.arguments or ""
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "callrewritten", "type": "function",  # OpenClaw rewrites ids: matching must not need them
             "function": {"name": "get_weather", "arguments": calls[0]["arguments"]}}]},
        {"role": "tool", "tool_call_id": "callrewritten", "content": "sunny, 21 C"},
    ]
    answer = client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, temperature=0.0,
                                            max_tokens=32)
    assert "sunny" in answer.choices[0].message.content
    first = _wait(lambda: (t := store.find_turn("tools-1", 1)) is not None and t.status == "sampled" and t)
    assert first.next_state == [messages[-1]] or first.next_state[0]["content"] == "sunny, 21 C"
    assert first.judgement["score"] == 1.0 and first.judgement["judge"] == "rules"
    assert _wait(lambda: store.find_turn("tools-1", 2)).status == "awaiting_next_state"


def test_user_replies_are_judged_and_neutral_turns_excluded(proxy, store):
    client = _client(proxy, "reply-1")
    history = [{"role": "user", "content": "Hello there."}]
    for reply in ("thanks, that is perfect", "no, that's wrong, try again", "what about Paris?"):
        answer = client.chat.completions.create(model="tiny", messages=history, max_tokens=8, temperature=0.0)
        history += [{"role": "assistant", "content": answer.choices[0].message.content},
                    {"role": "user", "content": reply}]
    client.chat.completions.create(model="tiny", messages=history, max_tokens=8, temperature=0.0)
    turns = _wait(lambda: (t := _turns(store, "reply-1")) and all(x.status != "judging" for x in t[:3])
                  and t[2].status == "excluded" and t)
    assert [t.judgement["score"] for t in turns[:3]] == [1.0, -1.0, 0.0]
    assert [t.status for t in turns[:3]] == ["sampled", "sampled", "excluded"]
    assert turns[2].exclusion_reason == "neutral"


def test_retry_is_not_a_next_state(proxy, store):
    client = _client(proxy, "retry-1")
    messages = [{"role": "user", "content": "Write a haiku."}]
    client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=1.0, seed=1)
    client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=1.0, seed=2)
    first = _wait(lambda: (t := store.find_turn("retry-1", 1)) is not None and t.status == "excluded" and t)
    assert first.exclusion_reason == "superseded_by_retry" and first.next_state is None
    assert _wait(lambda: store.find_turn("retry-1", 2)).status == "awaiting_next_state"


def test_feedback_endpoint_rates_the_latest_turn(proxy, store):
    client = _client(proxy, "fb-1")
    client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Hi"}], max_tokens=6)
    response = httpx.post(proxy.url + "/v1/feedback", json={"session_id": "fb-1", "rating": "down",
                                                            "text": "too long, one sentence please"})
    assert response.status_code == 200, response.text
    assert response.json()["score"] == -1.0 and response.json()["status"] == "sampled"
    turn = store.find_turn("fb-1", 1)
    assert turn.next_state[-1]["content"] == "too long, one sentence please"
    assert turn.judgement["votes"][0]["source"] == "feedback"
    assert httpx.post(proxy.url + "/v1/feedback", json={"session_id": "nope", "rating": 1}).status_code == 404
    assert httpx.post(proxy.url + "/v1/feedback", json={"session_id": "fb-1", "rating": 7}).status_code == 400
    stats = httpx.get(proxy.url + "/v1/stats").json()
    assert stats["samples"]["pending"] >= 1 and stats["feedback"] >= 1 and "proxy" in stats


def test_captured_openclaw_requests_classified(proxy, store, openclaw_captures):
    """The real client's bodies (stock OpenClaw, no session headers) go through with inferred metadata."""
    for name, capture in sorted(openclaw_captures.items()):
        body = dict(capture["body"], max_completion_tokens=4)
        headers = {k: v for k, v in capture["_meta"]["headers"] if k in ("traceparent", "user-agent")}
        response = httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=headers, timeout=120)
        assert response.status_code == 200, (name, response.text[:500])
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        first = json.loads(events[0])
        expected_side = name.startswith(("04", "06"))
        session = first["session_id"]
        if not expected_side:
            assert session == "openclaw:sessA"
    # rows are written just after each response: wait for the last ones
    turns = _wait(lambda: len(t := _turns(store, "openclaw:sessA")) == 3 and t)
    assert all(t.turn_type == "main" and t.turn_reason == "openclaw-main" for t in turns)
    side = _wait(lambda: {t.turn_reason for t in store.recent_turns(20) if t.turn_type == "side"}
                 >= {"openclaw-compaction", "openclaw-heartbeat"})
    assert side


def test_bad_inputs_get_clean_4xx(proxy):
    url = proxy.url + "/v1/chat/completions"
    cases = [
        (b"{not json", 400),
        (json.dumps({"model": "tiny"}).encode(), 400),
        (json.dumps({"messages": []}).encode(), 400),
        (json.dumps({"messages": [{"role": "wizard", "content": "hi"}]}).encode(), 400),
        (json.dumps({"messages": ["hi"]}).encode(), 400),
        (json.dumps([1, 2]).encode(), 400),
        (json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": -3}).encode(), 400),
        (json.dumps({"messages": [{"role": "user", "content": "x" * (2 * 1024 * 1024)}]}).encode(), 413),
    ]
    for payload, status in cases:
        response = httpx.post(url, content=payload, headers={"content-type": "application/json"}, timeout=60)
        assert response.status_code == status, (payload[:60], response.text[:300])
        assert response.json()["error"]["message"]


def test_api_key_required_and_checked(tool_engine, tmp_path):
    with ProxyProcess(tool_engine.url, tmp_path / "k.db", judge="rules", api_key="proxy-secret",
                      log_path=tmp_path / "proxy.log") as server:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        url = server.url + "/v1/chat/completions"
        assert httpx.post(url, json=body).status_code == 401
        assert httpx.post(url, json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.post(url, json=body, headers={"Authorization": "Bearer proxy-secret"}).status_code == 200
        assert httpx.get(server.url + "/healthz").status_code == 200  # probes need no key


def test_refuses_public_bind_without_key(tool_engine, tmp_path):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "slime.conversation", "serve", "--engine-url", tool_engine.url,
                             "--store", str(tmp_path / "x.db"), "--host", "0.0.0.0", "--port", "0"],
                            capture_output=True, text=True, timeout=60,
                            env={k: v for k, v in __import__("os").environ.items() if k != "OPENCLAW_PROXY_API_KEY"})
    assert result.returncode != 0 and "API key" in (result.stderr + result.stdout)


def test_healthz_follows_the_engine(tiny_model_path, tmp_path):
    engine = EngineProcess(tiny_model_path, log_path=tmp_path / "engine.log", ready_timeout=120).start()
    try:
        with ProxyProcess(engine.url, tmp_path / "h.db", judge="rules", log_path=tmp_path / "proxy.log") as server:
            assert httpx.get(server.url + "/healthz").json()["ok"] is True
            engine.stop()
            time.sleep(1.2)  # the probe result is cached for one second
            response = httpx.get(server.url + "/healthz")
            assert response.status_code == 503 and response.json()["ok"] is False
            chat = httpx.post(server.url + "/v1/chat/completions",
                              json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30)
            assert chat.status_code == 502 and "unreachable" in chat.json()["error"]["message"]
    finally:
        engine.stop()


@pytest.mark.parametrize("health", [(200, ""), (200, "OK"), (200, {"status": "ok"})], ids=["vllm", "text", "json"])
def test_healthz_reads_an_engine_health_without_a_version(health, tmp_path):
    # vLLM's /health is an empty 200: parsed as JSON it made the proxy report a live vLLM as unavailable (503), and
    # the proxy never became ready in front of it
    from helpers.recording_server import RecordingServer

    with RecordingServer({"/health": health}) as engine, \
            ProxyProcess(engine.url, tmp_path / "h.db", judge="rules", log_path=tmp_path / "proxy.log",
                         ready_timeout=30) as server:
        response = httpx.get(server.url + "/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True, "engine": "ready", "weight_version": None}


def test_llm_judge_through_the_engine_protocol(tool_engine, tmp_path):
    """--judge llm: votes from the engine (the random tiny model cannot answer in \\boxed{}: every vote is
    unparseable, so the turn is excluded as a judge failure, with the votes kept)."""
    with ProxyProcess(tool_engine.url, tmp_path / "llm.db", "--prm-m", "2", "--prm-max-new-tokens", "8",
                      "--judge-vote-timeout", "60", judge="llm", log_path=tmp_path / "proxy.log") as server:
        client = _client(server, "llm-1")
        history = [{"role": "user", "content": "Hello"}]
        answer = client.chat.completions.create(model="tiny", messages=history, max_tokens=6, temperature=0.0)
        history += [{"role": "assistant", "content": answer.choices[0].message.content},
                    {"role": "user", "content": "thanks!"}]
        client.chat.completions.create(model="tiny", messages=history, max_tokens=6, temperature=0.0)
        store = ConversationStore(server.store_path)
        try:
            turn = _wait(lambda: (t := store.find_turn("llm-1", 1)) is not None and t.judgement is not None and t,
                         timeout=60)
            votes = turn.judgement["votes"]
            assert turn.judgement["judge"] == "llm" and len(votes) == 2
            assert all(v["source"] == "llm" and v["rationale"] is not None for v in votes)
            if all(v["score"] is None for v in votes):
                assert turn.status == "excluded" and turn.exclusion_reason == "judge_failed"
        finally:
            store.close()
        assert httpx.get(server.url + "/v1/stats").json()["proxy"]["judge_stats"]["votes"] >= 2
