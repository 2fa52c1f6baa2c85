"""The real OpenClaw client (npm `openclaw`) runs two turns of one session through our server.

Chain: tiny random-weight engine (context 65536: OpenClaw prompts are ~20k tokens of system prompt +
tools) -> conversation proxy (judge "rules") -> `openclaw agent --local` configured with the proxy as an
`openai-completions` provider. Turn 2 is explicit praise, so the rules judge scores turn 1 +1 once turn 2's
request shows up as turn 1's next state, and turn 1 becomes a pending training sample.

The replies are garbage (random weights, cut at max_completion_tokens=64): OpenClaw still completes the
turn (stopReason "length", plus a "Reply truncated" notice of its own) and replays the raw text as the
assistant message of turn 2, which is all the mechanics need.

Needs `bash scripts/setup_openclaw.sh` (Node 24 + openclaw from the npm registry); skipped otherwise.
About 20-40 s per turn on 2 CPU cores, almost all of it inside OpenClaw.
"""

from __future__ import annotations

import sqlite3
import time
import uuid

import httpx
import pytest

from e2e.openclaw_harness import OpenClawClient, openclaw_available, openclaw_skip_reason

# e2e_full: out of the default run since the plugin e2e's plain half (test_openclaw_plugin.py) runs the same
# two-turn chain through the stock client and test_openclaw_main_job.py runs it on the main job; what only this
# test adds is OpenClaw's `full` profile at a 64k context
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.e2e_full,
    pytest.mark.slow,
    pytest.mark.skipif(not openclaw_available(), reason=openclaw_skip_reason()),
]

CONTEXT = 65536
API_KEY = "sk-openclaw-e2e"
FIRST_MESSAGE = "Hi! Write a haiku about the sea."
PRAISE = "thanks, that is perfect"


def _proxy_launcher():
    try:
        from slime.conversation.launch import ProxyProcess
    except ImportError:
        return None
    return ProxyProcess


@pytest.fixture(scope="module")
def long_context_engine(tiny_model_path, tmp_path_factory):
    from slime.engine.launch import EngineProcess

    log = tmp_path_factory.mktemp("openclaw-engine") / "engine.log"
    # the default prefix cache (16k tokens) is smaller than one OpenClaw prompt; 64k keeps turn 1 cached
    with EngineProcess(tiny_model_path, "--context-length", str(CONTEXT), "--prefix-cache-tokens", str(CONTEXT),
                       log_path=log, ready_timeout=120) as engine:
        yield engine


def _model_id(base_url: str, api_key: str | None) -> str:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    resp = httpx.get(base_url + "/v1/models", headers=headers, timeout=30)
    resp.raise_for_status()
    return resp.json()["data"][0]["id"]


def _run_two_turns(client: OpenClawClient, session: str, record_property):
    turns = []
    for i, message in enumerate((FIRST_MESSAGE, PRAISE), start=1):
        turn = client.run_turn(session, message)
        print(f"openclaw turn {i}: {turn.wall_s:.1f} s wall, rc={turn.returncode}, "
              f"run {((turn.json or {}).get('meta') or {}).get('durationMs')} ms, reply {turn.reply_text[:80]!r}")
        record_property(f"openclaw_turn{i}_wall_s", round(turn.wall_s, 1))
        turn.check()
        meta = turn.json.get("meta") or {}
        assert meta.get("aborted") is not True, turn.describe()
        # random weights: usually cut at the 64-token cap ("length"), sometimes an early end-of-turn ("stop")
        assert (meta.get("completion") or {}).get("finishReason") in ("length", "stop"), turn.describe()
        # the usage chunk of our stream reached the client (cached prompt tokens are reported as cacheRead)
        usage = (meta.get("agentMeta") or {}).get("usage") or {}
        assert usage.get("input", 0) + usage.get("cacheRead", 0) > 1000 and usage.get("output", 0) > 0, usage
        turns.append(turn)
    return turns


def _squash(text: str) -> str:
    return " ".join((text or "").split())


def _wait_for_sample(store_path, turn_id: int, timeout: float = 120.0) -> tuple | None:
    """(state, reward) of the turn's sample once the proxy's background judgement has stored it."""
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=30) as db:
            row = db.execute("SELECT state, reward FROM samples WHERE turn_id = ?", (turn_id,)).fetchone()
        if row is not None or time.monotonic() > deadline:
            return row
        time.sleep(0.5)


def test_openclaw_two_turns_first_becomes_a_sample(long_context_engine, tmp_path, record_property):
    start = time.monotonic()
    session = f"e2e-{uuid.uuid4().hex[:10]}"
    ProxyProcess = _proxy_launcher()
    if ProxyProcess is None:  # no proxy in this checkout: the client against the engine directly
        client = OpenClawClient(long_context_engine.url, None, _model_id(long_context_engine.url, None),
                                tmp_path / "openclaw")
        _run_two_turns(client, session, record_property)
        record_property("openclaw_test_s", round(time.monotonic() - start, 1))
        return

    from slime.conversation.store import ConversationStore

    store_path = tmp_path / "conversations.db"
    with ProxyProcess(long_context_engine.url, store_path, judge="rules", api_key=API_KEY,
                      log_path=tmp_path / "proxy.log") as proxy:
        client = OpenClawClient(proxy.url, API_KEY, _model_id(proxy.url, API_KEY), tmp_path / "openclaw")
        t1, _ = _run_two_turns(client, session, record_property)

        session_id = f"openclaw:{session}"  # the proxy reads sessionId from OpenClaw's "Runtime:" line
        deadline = time.monotonic() + 30  # the proxy writes each turn's row just after its response
        while True:
            with sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=30) as db:
                main_ids = [r[0] for r in db.execute(
                    "SELECT id FROM turns WHERE session_id = ? AND turn_type = 'main' ORDER BY turn_num",
                    (session_id,))]
                sessions = [r[0] for r in db.execute("SELECT id FROM sessions")]
            if len(main_ids) >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(main_ids) >= 2, f"main turns of {session_id}: {main_ids}; sessions in store: {sessions}"
        sample = _wait_for_sample(store_path, main_ids[0])

        store = ConversationStore(store_path)
        try:
            first = store.get_turn(main_ids[0])
            stats = store.stats()
        finally:
            store.close()
        print(f"store stats: {stats}")
        assert first.turn_num == 1 and first.request["messages"][0]["role"] == "system"
        # what OpenClaw showed as the reply is what the proxy recorded as the response (unless the random
        # text happens to hold a tag token such as <think>, which OpenClaw may strip from what it shows)
        content = _squash(first.response_message.get("content"))
        if "<" not in content:
            assert content[:40] in _squash(t1.reply_text), (first.response_message, t1.reply_text)
        # next state = turn 2's new messages: the praise (plus OpenClaw's trailing internal-context message)
        assert first.next_state, first
        assert any(m.get("role") == "user" and PRAISE in str(m.get("content")) for m in first.next_state), \
            first.next_state
        assert first.judgement is not None and not first.judgement.get("failed"), first.judgement
        assert first.judgement["score"] > 0, first.judgement
        assert sample is not None, f"turn {first.id} has no sample (status {first.status}, {first.exclusion_reason})"
        assert sample[0] == "pending" and sample[1] > 0, sample
        assert first.status == "sampled"
        assert stats["samples"]["pending"] >= 1
        assert stats["turns"]["main"] >= 2
    record_property("openclaw_test_s", round(time.monotonic() - start, 1))
