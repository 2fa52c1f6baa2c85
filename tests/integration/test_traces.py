"""Traces from apps that call their own model: `POST /v1/traces`, operator feedback, and the client library.

Real tiny engine + real proxy process + real SQLite store on loopback. Covers: a trace judged from what followed
it, the explicit reward winning, a trace waiting until a later trace of its session continues it, idempotency,
off-policy samples (ids rendered by the policy's template, no log-probs), operator language feedback by id,
stats and export, clear 4xx for bad input while chat keeps being served, and `TraceClient` spooling while the
server is down and delivering everything exactly once when it is back.
"""

from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest

from slime.conversation.launch import ProxyProcess
from slime.conversation.store import ConversationStore
from slime.conversation.trace_client import TraceClient
from slime.engine.launch import EngineProcess, free_port


@pytest.fixture(scope="module")
def engine(tiny_model_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("trace-engine") / "engine.log"
    with EngineProcess(tiny_model_path, "--context-length", "4096", log_path=log, ready_timeout=120) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(engine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace-proxy")
    with ProxyProcess(engine.url, folder / "conversations.db", "--max-body-mb", "1", judge="rules",
                      log_path=folder / "proxy.log") as server:
        yield server


def _post(proxy, body, path="/v1/traces"):
    return httpx.post(proxy.url + path, json=body, timeout=60)


def _wait_status(proxy, trace_id, wanted, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        data = httpx.get(f"{proxy.url}/v1/traces/{trace_id}", timeout=30).json()
        if data.get("status") in wanted or time.monotonic() > deadline:
            return data
        time.sleep(0.2)


def test_a_trace_is_judged_from_what_followed_and_becomes_an_off_policy_sample(proxy, tiny_model_path):
    body = {"trace_id": "t-judged", "task": "greeting", "model": "gpt-elsewhere", "profile": {"user": "u1"},
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}],
            "response": "Hi there!", "next_messages": [{"role": "user", "content": "thanks, that is perfect"}]}
    first = _post(proxy, body)
    assert first.status_code == 200, first.text
    assert first.json()["duplicate"] is False and first.json()["session_id"] == "trace:t-judged"
    again = _post(proxy, body)  # the same trace id again: stored once
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["turn_id"] == first.json()["turn_id"]
    state = _wait_status(proxy, "t-judged", {"sampled", "excluded"})
    assert state["status"] == "sampled" and state["score"] == 1.0 and state["sample"] == "pending", state

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    store = ConversationStore(proxy.store_path)
    try:
        turn = store.trace_turn("t-judged")
        sample = store.get_sample(turn.id)
    finally:
        store.close()
    expected_prompt = tok.apply_chat_template(body["messages"], add_generation_prompt=True, tokenize=False)
    assert turn.prompt_ids == tok.encode(expected_prompt, add_special_tokens=False)
    assert tok.decode(turn.response_ids) == "Hi there!<|im_end|>"  # ends on the end-of-turn token
    assert turn.turn_reason == "trace" and turn.response_logprobs == []
    assert sample["rollout_log_probs"] is None and sample["metadata"]["off_policy"] is True
    assert sample["tokens"] == turn.prompt_ids + turn.response_ids and sample["reward"] == {"score": 1.0}


def test_an_explicit_reward_wins_over_the_judge(proxy):
    resp = _post(proxy, {"trace_id": "t-reward", "prompt": "2+2?", "response": "5", "reward": -1,
                         "next_messages": [{"role": "user", "content": "thanks, perfect"}]})
    assert resp.status_code == 200, resp.text
    state = _wait_status(proxy, "t-reward", {"sampled", "excluded"})
    assert state["score"] == -1.0 and state["status"] == "sampled"


def test_a_later_trace_of_the_session_is_the_next_state_of_the_earlier_one(proxy):
    opening = [{"role": "user", "content": "Name a fruit."}]
    r1 = _post(proxy, {"trace_id": "s-1", "session_id": "app-conv-7", "messages": opening, "response": "Apple."})
    assert r1.json()["status"] == "awaiting_next_state"
    follow = opening + [{"role": "assistant", "content": "Apple."},
                        {"role": "user", "content": "no, that is wrong, I wanted a berry"}]
    r2 = _post(proxy, {"trace_id": "s-2", "session_id": "app-conv-7", "messages": follow, "response": "Strawberry."})
    assert r2.status_code == 200 and r2.json()["turn"] == 2
    state = _wait_status(proxy, "s-1", {"sampled", "excluded"})
    assert state["status"] == "sampled" and state["score"] == -1.0, state
    assert _wait_status(proxy, "s-2", {"awaiting_next_state"})["status"] == "awaiting_next_state"


def test_operator_language_feedback_judges_a_waiting_trace(proxy):
    _post(proxy, {"trace_id": "t-op", "prompt": "Summarise the refund policy.", "response": "Refunds exist."})
    resp = _post(proxy, {"feedback": "too vague, it missed the 30-day window", "polarity": "negative"},
                 "/v1/traces/t-op/feedback")
    assert resp.status_code == 200, resp.text
    assert resp.json()["score"] == -1.0 and resp.json()["status"] == "sampled"
    missing = _post(proxy, {"feedback": "great"}, "/v1/traces/no-such-trace/feedback")
    assert missing.status_code == 404 and "no-such-trace" in missing.json()["error"]["message"]
    stats = httpx.get(proxy.url + "/v1/stats", timeout=30).json()["traces"]
    assert stats["total"] >= 3 and stats["negative"] >= 1 and stats["positive"] >= 1


@pytest.mark.parametrize("body, status, fragment", [
    ({"response": "x"}, 400, "needs messages"),
    ({"prompt": 5, "response": "x"}, 400, "trace.prompt"),
    ({"prompt": "hi"}, 400, "trace.response"),
    ({"prompt": "hi", "response": ""}, 400, "empty"),
    ({"prompt": "hi", "response": "x", "reward": 3}, 400, "outside [-1, 1]"),
    ({"prompt": "hi", "response": "x", "reward": True}, 400, "trace.reward"),
    ({"prompt": "hi", "response": "x", "rewards": 1}, 400, "unknown field"),
    ({"messages": [{"role": "robot", "content": "x"}], "response": "x"}, 400, "role"),
    ({"messages": "hi", "response": "x"}, 400, "trace.messages"),
    ({"traces": []}, 400, "non-empty list"),
    ({"traces": [{"prompt": "a", "response": "b"}, {"prompt": "a"}]}, 400, "traces[1].response"),
    ({"traces": [{"prompt": "a", "response": "b", "trace_id": "d"}, {"prompt": "a", "response": "b", "trace_id": "d"}]},
     400, "repeats"),
    ({"traces": [{"prompt": "a", "response": "b"}] * 1001}, 413, "at most 1000"),
    ({"prompt": "hi " * 5000, "response": "x"}, 400, "exceed the model's context"),
    ([1, 2], 400, "expected an object"),
])
def test_bad_traces_get_a_clear_4xx_and_nothing_is_stored(proxy, body, status, fragment):
    before = httpx.get(proxy.url + "/v1/stats", timeout=30).json()["traces"]["total"]
    resp = _post(proxy, body)
    assert resp.status_code == status, resp.text
    assert fragment in resp.json()["error"]["message"], resp.json()
    assert httpx.get(proxy.url + "/v1/stats", timeout=30).json()["traces"]["total"] == before


def test_a_huge_body_is_refused_and_chat_is_still_served(proxy):
    resp = httpx.post(proxy.url + "/v1/traces", content=b'{"prompt": "' + b"x" * (2 << 20) + b'"}',
                      headers={"Content-Type": "application/json"}, timeout=60)
    assert resp.status_code == 413
    assert httpx.post(proxy.url + "/v1/traces", content=b"{not json", timeout=30).status_code == 400
    chat = httpx.post(proxy.url + "/v1/chat/completions", timeout=60,
                      json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["role"] == "assistant"


def test_export_holds_the_traces(proxy, tmp_path):
    from slime.conversation.__main__ import main as cli

    assert cli(["export", "--store", str(proxy.store_path), "--out", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "conversations.jsonl")]
    assert any(r["session_id"] == "trace:t-judged" and r["response"]["content"] == "Hi there!" for r in rows)


def test_the_client_spools_while_the_server_is_down_and_delivers_each_trace_once(engine, tmp_path):
    port = free_port()
    spool = tmp_path / "spool.jsonl"
    client = TraceClient(f"http://127.0.0.1:{port}", spool=spool, batch_size=7, timeout=5)
    ids = [client.record(task="qa", model="elsewhere", prompt=f"question {i}?", response=f"answer {i}",
                         profile={"i": i}, reward=1 if i % 2 else -1) for i in range(20)]
    down = client.flush()
    assert down["sent"] == 0 and down["remaining"] == 20 and down["error"], down
    assert client.stats()["unsent"] == 20 and client.stats()["pending"] is None
    bad = client.record(prompt="bad", response="x", reward=5)  # the server will refuse this one
    backup = tmp_path / "spool.copy"
    shutil.copy(spool, backup)

    store_path = tmp_path / "conv.db"
    with ProxyProcess(engine.url, store_path, judge="rules", port=port, log_path=tmp_path / "proxy.log"):
        up = client.flush()
        assert up == {"sent": 20, "duplicates": 0, "rejected": 1, "remaining": 0, "error": None}, up
        assert client.flush()["sent"] == 0  # nothing left to send
        # the answer to a batch was lost and the client sends it all again: every trace is stored once
        shutil.copy(backup, spool)
        again = client.flush()
        assert again["sent"] == 0 and again["duplicates"] == 20 and again["rejected"] == 1, again
        client.submit_language_feedback(ids[0], "that answer was wrong", "negative")
        stats = client.stats()
        assert stats["unsent"] == 0 and stats["server"]["total"] == 20, stats
        assert stats["positive"] == 10 and stats["negative"] == 10, stats
    rejected = [json.loads(line) for line in open(client.rejected)]
    assert len(rejected) == 2 and all(r["trace"]["trace_id"] == bad for r in rejected)
    assert "outside [-1, 1]" in rejected[0]["error"]["message"]
    store = ConversationStore(store_path)
    try:
        assert store.trace_stats()["total"] == 20
        turn = store.trace_turn(ids[0])
        assert turn.request["model"] == "elsewhere" and turn.next_state[-1]["content"] == "that answer was wrong"
    finally:
        store.close()
    client.close()


@pytest.mark.slow
def test_a_trace_only_run_trains_a_step_and_marks_its_samples_trained(tmp_path):
    """No chat at all: two traces with explicit rewards fill a batch of 2; the trainer recomputes their old
    log-probs (they have none), TIS leaves them at weight 1, --off-policy-weight scales their loss, and one step
    trains and is published."""
    from helpers.jobs import healthz, wait_for
    from slime.conversation.launch import ConversationJob

    run = tmp_path / "run"
    job = ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh", "--hf-checkpoint", "tiny", "--save-interval",
                          "1000", "--use-tis", "--off-policy-weight", "0.5", log_path=tmp_path / "job.log",
                          env={"RUN_DIR": str(run), "ROLLOUT_BATCH_SIZE": "2", "PRM_TYPE": "rules"}, ready_timeout=300)
    with job:
        with TraceClient(job.url, spool=tmp_path / "spool.jsonl") as client:
            ids = [client.record(task="qa", model="elsewhere", prompt="Name a colour.", response="Blue.", reward=1),
                   client.record(task="qa", model="elsewhere", prompt="Name a colour.", response="Seven.", reward=-1)]
            assert client.flush()["sent"] == 2
        wait_for(lambda: (healthz(job.url) or {}).get("weight_version") not in (None, "0"), 300, job,
                 "a trained weight version")
        traces = httpx.get(job.url + "/v1/stats", timeout=10).json()["traces"]
    assert job.process.returncode == 0, (tmp_path / "job.log").read_text(errors="replace")[-3000:]
    assert traces["trained"] == 2 or traces["total"] == 2
    store = ConversationStore(run / "conversations.db")
    try:
        for trace_id in ids:
            assert store.sample_state(store.trace_turn(trace_id).id) == "trained"
    finally:
        store.close()
    metrics = [json.loads(line) for line in open(run / "metrics.jsonl")]
    steps = [m for m in metrics if "train/pg_loss" in m]
    assert steps, metrics
    # TIS left the off-policy samples at weight 1 (it has no behaviour log-probs to weigh them with), and its
    # metrics average over the rows it weighs: none in a batch of traces, so none is logged (not a ratio of 1)
    assert all("train/tis" not in m and "train/tis_weight" not in m for m in steps), steps
    assert all("train/ois" in m for m in steps), steps  # TIS ran on the batch


def test_ten_thousand_traces_arrive_in_batches_while_chat_is_served(engine, tmp_path):
    """bench/trace_ingestion.py measures the rates; this checks the outcome: every trace stored and judged once,
    every chat request answered meanwhile."""
    import threading

    with ProxyProcess(engine.url, tmp_path / "conv.db", judge="rules", log_path=tmp_path / "proxy.log") as proxy, \
            TraceClient(proxy.url, spool=tmp_path / "spool.jsonl", batch_size=500) as client:
        answered, failed, stop = [], [], threading.Event()

        def chat():
            with httpx.Client(timeout=120) as http:
                while not stop.is_set():
                    resp = http.post(proxy.url + "/v1/chat/completions", headers={"X-Session-Id": "chatter"},
                                     json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
                    (answered if resp.status_code == 200 else failed).append(resp.status_code)

        chatter = threading.Thread(target=chat)
        chatter.start()
        try:
            for i in range(10_000):
                client.record(task="load", model="elsewhere", prompt=f"q{i}", response=f"a{i}", reward=1 if i % 2 else 0)
            result = client.flush()
            deadline = time.monotonic() + 300
            while (stats := httpx.get(proxy.url + "/v1/stats", timeout=60).json()["traces"])["pending"]:
                assert time.monotonic() < deadline, stats
                time.sleep(0.5)
        finally:
            stop.set()
            chatter.join()
    assert result == {"sent": 10_000, "duplicates": 0, "rejected": 0, "remaining": 0, "error": None}, result
    assert stats["total"] == 10_000 and stats["positive"] == 5_000 and stats["neutral"] == 5_000, stats
    assert answered and not failed, failed[:5]


def test_collecting_over_the_api_needs_the_lease_and_names_bad_fields(proxy):
    """`collect --api-endpoint` (POST /v1/rollouts/claim, /ack, /release): one collector at a time."""
    assert _post(proxy, {"limit": 1}, "/v1/rollouts/claim").status_code == 400  # no collector
    assert _post(proxy, {"collector": "a", "limit": 0}, "/v1/rollouts/claim").json()["error"]["param"] == "limit"
    assert _post(proxy, {"collector": "a", "lease_ttl": -1}, "/v1/rollouts/claim").status_code == 400
    first = _post(proxy, {"collector": "a", "limit": 1}, "/v1/rollouts/claim")
    assert first.status_code == 200 and len(first.json()["rows"]) == 1, first.text
    other = _post(proxy, {"collector": "b"}, "/v1/rollouts/claim")
    assert other.status_code == 409 and "holds the store: a" in other.json()["error"]["message"]
    assert _post(proxy, {"collector": "b", "batch_id": first.json()["batch_id"]}, "/v1/rollouts/ack").status_code == 409
    assert _post(proxy, {"collector": "a", "batch_id": first.json()["batch_id"]},
                 "/v1/rollouts/ack").json() == {"exported": 1}
    assert _post(proxy, {"collector": "a"}, "/v1/rollouts/release").status_code == 200
    lost = _post(proxy, {"collector": "b", "limit": 1}, "/v1/rollouts/claim").json()  # never acknowledged
    again = _post(proxy, {"collector": "b", "limit": 1}, "/v1/rollouts/claim").json()
    assert again["rows"][0]["turn_id"] == lost["rows"][0]["turn_id"]  # handed back, and out again
    assert _post(proxy, {"collector": "b"}, "/v1/rollouts/release").status_code == 200
