"""The proxy over HTTP with requests tagged as the rl-training-headers OpenClaw plugin tags them: the tags decide
the session and main/side, X-Turn-Id lands on the turn as its trace id, /v1/stats counts where inference from the
body disagrees; a request missing a tag (the plugin failed open) gets that part inferred.

Bodies have OpenClaw's shapes (agent system prompt + tools + Runtime line; the compaction summary's prompt); the
real client with the plugin is in tests/e2e/test_openclaw_plugin.py."""

from __future__ import annotations

import sqlite3

import httpx
import pytest

from slime.conversation.launch import ProxyProcess

AGENT_SYSTEM = "You are a personal assistant running inside OpenClaw."
TOOLS = [{"type": "function", "function": {"name": "read", "description": "Read a file",
                                           "parameters": {"type": "object", "properties": {}}}}]
RUNTIME = "Runtime: agent=main | session=agent:main:explicit:sessp | sessionId=sessP | host=vm"


def agent_body(*later: dict) -> dict:
    return {"model": "m", "max_tokens": 4, "stream": True, "tools": TOOLS,
            "messages": [{"role": "system", "content": AGENT_SYSTEM},
                         {"role": "user", "content": f"[Fri 2026-11-27 17:34 UTC] hi\n\n{RUNTIME}"}, *later]}


COMPACTION_BODY = {"model": "m", "max_tokens": 4, "stream": True, "messages": [
    {"role": "system", "content": "You are a context summarization assistant. Do NOT continue the conversation."},
    {"role": "user", "content": [{"type": "text", "text": "<conversation>\n[User]: hi\n</conversation>\n\nSummarize."}]}]}


@pytest.fixture(scope="module")
def proxy(engine_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("header-check")
    with ProxyProcess(engine_server.url, folder / "conversations.db", judge="rules",
                      log_path=folder / "proxy.log") as proxy:
        yield proxy


def _chat(proxy, body: dict, headers: dict) -> httpx.Response:
    resp = httpx.post(proxy.url + "/v1/chat/completions", json=body, headers=headers, timeout=120)
    assert resp.status_code == 200, resp.text
    assert "data: [DONE]" in resp.text
    return resp


def test_tags_win_and_disagreements_are_counted(proxy):
    session = "openclaw:sessP"
    tags = {"X-Session-Id": session, "X-Turn-Reason": "user"}
    _chat(proxy, agent_body(), {**tags, "X-Turn-Type": "main", "X-Turn-Id": "run-1"})
    _chat(proxy, agent_body({"role": "assistant", "content": "hello"}, {"role": "user", "content": "thanks!"}),
          {**tags, "X-Turn-Type": "main", "X-Turn-Id": "run-2"})
    _chat(proxy, COMPACTION_BODY, {"X-Session-Id": session, "X-Turn-Type": "side", "X-Turn-Reason": "compaction",
                                   "X-Turn-Id": "compaction-1"})
    # the plugin failed open on this one: only the session tag; main/side comes from inference (side: compaction)
    _chat(proxy, COMPACTION_BODY, {"X-Session-Id": session})
    stats = httpx.get(proxy.url + "/v1/stats", timeout=30).json()
    check = stats["proxy"]["header_check"]
    assert check["requests"] == 4
    assert check["turn_type"] == {"agree": 3, "disagree": 0, "disagreements": {}}
    # both compaction requests carry no Runtime line: inference would have put them on a prefix: session
    assert check["session"] == {"agree": 2, "disagree": 2, "split_sessions": 1, "merged_sessions": 0}
    assert {e["inferred"]["session_source"] for e in check["recent_disagreements"]} == {"prefix"}

    with sqlite3.connect(f"file:{proxy.store_path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT session_id, turn_num, turn_type, turn_reason, trace_id FROM turns ORDER BY id").fetchall()
    assert rows == [(session, 1, "main", "header", "run-1"), (session, 2, "main", "header", "run-2"),
                    (session, 3, "side", "header", "compaction-1"),
                    (session, 4, "side", "openclaw-compaction", None)]


def test_untagged_requests_are_not_counted(proxy):
    before = httpx.get(proxy.url + "/v1/stats", timeout=30).json()["proxy"]["header_check"]["requests"]
    _chat(proxy, agent_body(), {})
    after = httpx.get(proxy.url + "/v1/stats", timeout=30).json()["proxy"]["header_check"]["requests"]
    assert after == before


def test_session_done_endpoint_ends_the_session(proxy):
    """POST /v1/sessions/done (the plugin's session_end): the session is finalized, its waiting turn excluded."""
    session = "openclaw:sessDone"
    _chat(proxy, agent_body(), {"X-Session-Id": session, "X-Turn-Type": "main", "X-Turn-Id": "run-d"})
    resp = httpx.post(proxy.url + "/v1/sessions/done", json={"session_id": session}, timeout=30)
    assert resp.status_code == 200 and resp.json() == {"session_id": session, "finalized": True}, resp.text
    with sqlite3.connect(f"file:{proxy.store_path}?mode=ro", uri=True) as db:
        assert db.execute("SELECT finalize_reason FROM sessions WHERE id = ?", (session,)).fetchone() == ("session_done",)
        assert db.execute("SELECT status, exclusion_reason FROM turns WHERE session_id = ?", (session,)).fetchall() == \
            [("excluded", "no_next_state")]
    # a session the server never saw: a clear 404, and nothing is created for it
    resp = httpx.post(proxy.url + "/v1/sessions/done", json={"session_id": "openclaw:never-seen"}, timeout=30)
    assert resp.status_code == 404 and resp.json()["error"]["param"] == "session_id", resp.text
    with sqlite3.connect(f"file:{proxy.store_path}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM sessions WHERE id = 'openclaw:never-seen'").fetchone() == (0,)
    for bad in ({}, {"session_id": ""}, {"session_id": 5}, []):
        resp = httpx.post(proxy.url + "/v1/sessions/done", json=bad, timeout=30)
        assert resp.status_code == 400 and resp.json()["error"]["param"] == "session_id", resp.text
