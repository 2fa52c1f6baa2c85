"""Inspecting what was collected: the store's per-session summaries and detail, the `sessions` CLI on a store
file, and the proxy's verbose-log switches (classification and judging lines at DEBUG)."""

from __future__ import annotations

import json
import logging
import time

import pytest

import slime.conversation.store as store_module
from slime.conversation.store import ConversationStore

T0 = 1_700_000_000.0
NEXT = [{"role": "user", "content": "next"}]


@pytest.fixture()
def store(tmp_path):
    s = ConversationStore(tmp_path / "store.db")
    yield s
    s.close()


def add_turn(store, session, *, turn_type="main", status="awaiting_next_state", now=T0, **kw):
    fields = dict(
        session_id=session, turn_type=turn_type, turn_reason="header", now=now, status=status,
        request={"messages": [{"role": "user", "content": "hi"}], "tools": None},
        response_message={"role": "assistant", "content": "hello"},
        prompt_ids=[1, 2, 3], response_ids=[4, 5], response_logprobs=[-0.1, -2.5],
        weight_version="v0", finish_reason="stop", trace_id=None, fingerprints=["fp1", "fp2"],
    )
    fields.update(kw)
    return store.add_turn(**fields)


def judged(store, turn, score, *, failed=False, judge="rules"):
    store.set_next_state(turn.id, NEXT, "request")
    store.set_judgement(turn.id, {"score": score, "votes": [{"score": None if failed else int(score), "source": judge}],
                                  "judge": judge, "failed": failed})


def fill(store) -> dict:
    """Three sessions with known counts: "a" (mixed, active), "b" (one neutral turn, finalized), "c" (empty)."""
    t1 = add_turn(store, "a", now=T0 + 1, session_source="header")
    judged(store, t1, 1.0)
    store.add_sample(t1.id, {"t": 1}, 1.0, now=T0 + 1)
    t2 = add_turn(store, "a", now=T0 + 2, session_source="runtime")  # the first source recorded stays
    judged(store, t2, -1.0)
    store.add_sample(t2.id, {"t": 2}, -1.0, now=T0 + 2)
    demo = add_turn(store, "a", turn_type="demonstration", status="judged", now=T0 + 3,
                    turn_reason=f"teacher_for_turn:{t2.id}")
    store.set_judgement(demo.id, {"score": 0.0, "votes": [], "judge": "demonstration", "failed": False})
    store.add_sample(demo.id, {"t": "demo"}, 0.0, now=T0 + 3)
    t3 = add_turn(store, "a", now=T0 + 4)
    judged(store, t3, 0.0, failed=True, judge="llm")
    store.set_status(t3.id, "excluded", "judge_failed")
    t4 = add_turn(store, "a", now=T0 + 5, response_message={"role": "assistant", "content": "x" * 500},
                  prompt_ids=list(range(1000)), response_ids=list(range(7)))
    side = add_turn(store, "a", turn_type="side", status="side", now=T0 + 6, turn_reason="title-like",
                    response_message={"role": "assistant", "content": None, "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]})
    assert store.claim_samples(1, 1)[0]["t"] == 1
    store.mark_trained(1)
    assert store.claim_samples(2, 1)[0]["t"] == 2
    store.add_feedback("a", t2.id, -1, "meh", now=T0 + 7)
    store.add_feedback("a", None, None, "in general", now=T0 + 8)

    b1 = add_turn(store, "b", now=T0 + 20, session_source="prefix")
    judged(store, b1, 0.0)
    store.set_status(b1.id, "excluded", "neutral")
    store.finalize_session("b", "idle", now=T0 + 25)

    store.touch_session("c", "body", now=T0 + 30)
    return {"t1": t1, "t2": t2, "demo": demo, "t3": t3, "t4": t4, "side": side, "b1": b1}


EMPTY_COUNTS = {
    "turns": {"total": 0, "main": 0, "side": 0, "demonstration": 0, "by_status": {}},
    "judged": 0, "judge_failures": 0, "samples": {"pending": 0, "in_batch": 0, "trained": 0, "exported": 0},
    "rewards": {"-1": 0, "0": 0, "1": 0, "mean": None}, "feedback": 0,
}


def test_summaries_exact_counts(store):
    fill(store)
    page = store.session_summaries()
    assert (page["total"], page["limit"], page["offset"], page["active_only"]) == (3, 50, 0, False)
    c, b, a = page["sessions"]  # most recently seen first
    assert c == {"id": "c", "source": "body", "created": T0 + 30, "last_seen": T0 + 30, "active": True,
                 "finalized": None, "finalize_reason": None, **EMPTY_COUNTS}
    assert b == {
        "id": "b", "source": "prefix", "created": T0 + 20, "last_seen": T0 + 20, "active": False,
        "finalized": T0 + 25, "finalize_reason": "idle",
        "turns": {"total": 1, "main": 1, "side": 0, "demonstration": 0, "by_status": {"excluded": 1}},
        "judged": 1, "judge_failures": 0, "samples": {"pending": 0, "in_batch": 0, "trained": 0, "exported": 0},
        "rewards": {"-1": 0, "0": 0, "1": 0, "mean": None}, "feedback": 0,
    }
    assert a == {
        "id": "a", "source": "header", "created": T0 + 1, "last_seen": T0 + 6, "active": True,
        "finalized": None, "finalize_reason": None,
        "turns": {"total": 6, "main": 4, "side": 1, "demonstration": 1,
                  "by_status": {"sampled": 3, "excluded": 1, "awaiting_next_state": 1, "side": 1}},
        # main-line turns only: the demonstration's judgement is not a judged turn
        "judged": 3, "judge_failures": 1,
        "samples": {"pending": 1, "in_batch": 1, "trained": 1, "exported": 0},
        "rewards": {"-1": 1, "0": 1, "1": 1, "mean": 0.0},
        "feedback": 2,
    }
    json.dumps(page)  # served as JSON by the proxy


def test_summaries_agree_with_stats(store):
    fill(store)
    stats = store.stats()
    sessions = store.session_summaries()["sessions"]
    assert sum(s["judged"] for s in sessions) == stats["judged"]
    assert sum(s["judge_failures"] for s in sessions) == stats["judge_failures"]
    assert sum(s["feedback"] for s in sessions) == stats["feedback"]
    for key in ("main", "side", "demonstration"):
        assert sum(s["turns"][key] for s in sessions) == stats["turns"][key]
    for state in ("pending", "in_batch", "trained"):
        assert sum(s["samples"][state] for s in sessions) == stats["samples"][state]


def test_summaries_pages_and_active_only(store):
    fill(store)
    assert [s["id"] for s in store.session_summaries(limit=1, offset=1)["sessions"]] == ["b"]
    assert [s["id"] for s in store.session_summaries(limit=2)["sessions"]] == ["c", "b"]
    beyond = store.session_summaries(offset=5)
    assert beyond["total"] == 3 and beyond["sessions"] == []
    active = store.session_summaries(active_only=True)
    assert active["total"] == 2 and [s["id"] for s in active["sessions"]] == ["c", "a"]
    add_turn(store, "b", now=T0 + 40)  # a finalized session that speaks again is active again
    assert [s["id"] for s in store.session_summaries(active_only=True)["sessions"]] == ["b", "c", "a"]
    for bad in ({"limit": 0}, {"offset": -1}):
        with pytest.raises(ValueError):
            store.session_summaries(**bad)


def test_summaries_of_empty_store(store):
    assert store.session_summaries() == {"total": 0, "limit": 50, "offset": 0, "active_only": False, "sessions": []}
    assert store.session_detail("nope") is None


def test_detail_rows(store):
    turns = fill(store)
    detail = store.session_detail("a")
    summary = store.session_summaries()["sessions"][2]
    assert {k: v for k, v in detail.items() if k not in ("turn_rows", "feedback_rows")} == summary
    rows = detail["turn_rows"]
    assert [r["turn_id"] for r in rows] == [turns[k].id for k in ("t1", "t2", "demo", "t3", "t4", "side")]
    assert [r["turn_num"] for r in rows] == [1, 2, -1, 3, 4, 5]
    assert [r["type"] for r in rows] == ["main", "main", "demonstration", "main", "main", "side"]
    assert [r["status"] for r in rows] == ["sampled", "sampled", "sampled", "excluded", "awaiting_next_state", "side"]
    assert [r["sample_state"] for r in rows] == ["trained", "in_batch", "pending", None, None, None]
    assert [r["reward"] for r in rows] == [1.0, -1.0, 0.0, None, None, None]
    assert [r["score"] for r in rows] == [1.0, -1.0, 0.0, 0.0, None, None]
    assert [r["judge_failed"] for r in rows] == [False, False, False, True, None, None]
    assert [r["exclusion_reason"] for r in rows] == [None, None, None, "judge_failed", None, None]
    t1, _, demo, t3, t4, side = rows
    assert t1 == {
        "turn_id": turns["t1"].id, "turn_num": 1, "type": "main", "reason": "header", "status": "sampled",
        "exclusion_reason": None, "score": 1.0, "judge": "rules", "judge_failed": False, "votes": [1],
        "sample_state": "trained", "reward": 1.0, "weight_version": "v0", "created": T0 + 1,
        "finish_reason": "stop", "next_state_source": "request", "prompt_tokens": 3, "response_tokens": 2,
        "response_preview": "hello", "tool_calls": [],
    }
    assert demo["reason"] == f"teacher_for_turn:{turns['t2'].id}" and demo["judge"] == "demonstration"
    assert t3["votes"] == [None] and t3["judge"] == "llm"
    assert (t4["prompt_tokens"], t4["response_tokens"]) == (1000, 7)
    assert t4["response_preview"] == "x" * 200
    assert side["response_preview"] == "" and side["tool_calls"] == ["get_weather"] and side["reason"] == "title-like"
    assert detail["feedback_rows"] == [
        {"created": T0 + 7, "turn_num": 2, "rating": -1, "text": "meh"},
        {"created": T0 + 8, "turn_num": None, "rating": None, "text": "in general"},
    ]
    assert store.session_detail("c")["turn_rows"] == [] and store.session_detail("nope") is None
    json.dumps(detail)


def test_no_payload_is_decoded(store, monkeypatch):
    fill(store)

    def refuse(*args):
        raise AssertionError("payload decoded")

    for name in ("_unzjson", "_unpack_ids", "_unpack", "_turn_from_row"):
        monkeypatch.setattr(store_module, name, refuse)
    store.session_summaries()
    store.session_detail("a")  # token counts from the blobs' lengths, not their ids


def test_source_fills_in_once(store):
    add_turn(store, "x")
    assert store.session_summaries()["sessions"][0]["source"] is None
    add_turn(store, "x", session_source="runtime")
    add_turn(store, "x", session_source="header")
    assert store.session_summaries()["sessions"][0]["source"] == "runtime"


def _big_store(store, sessions: int, turns: int) -> None:
    """sessions x turns rows written straight into the tables (add_turn would take a minute)."""
    payload = (store_module._zjson({"messages": []}), store_module._pack_ids(range(50)),
               store_module._pack_ids(range(5)), store_module._pack("d", [0.0] * 5))
    with store._write() as db:
        turn_id = 0
        for s in range(sessions):
            db.execute("INSERT INTO sessions (id, source, created, last_seen, finalized) VALUES (?, 'header', ?, ?, ?)",
                       (f"s{s}", T0 + s, T0 + s + 1, None if s % 2 else T0 + s + 2))
            for t in range(turns):
                turn_id += 1
                db.execute("INSERT INTO turns (id, session_id, turn_num, turn_type, turn_reason, status, created, "
                           "response_message, fingerprints, judgement) VALUES (?, ?, ?, 'main', 'header', 'sampled', "
                           "?, '{\"content\":\"hi\"}', '[]', '{\"score\":1.0,\"failed\":false}')",
                           (turn_id, f"s{s}", t + 1, T0 + s))
                db.execute("INSERT INTO turn_payloads VALUES (?, ?, ?, ?, ?)", (turn_id, *payload))
                db.execute("INSERT INTO samples (turn_id, created, state, reward, data) VALUES (?, ?, 'pending', 1.0, x'00')",
                           (turn_id, T0 + s))


def test_fast_on_a_large_store(store):
    _big_store(store, sessions=1500, turns=8)  # 12k turns
    db = store._conn
    ids = json.dumps(["s1"])
    plans = {
        "turns": "SELECT session_id, turn_type, status, COUNT(*) FROM turns "
                 "WHERE session_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2, 3",
        "samples": "SELECT t.session_id, s.state, COUNT(*) FROM turns t JOIN samples s ON s.turn_id = t.id "
                   "WHERE t.session_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2",
        "feedback": "SELECT session_id, COUNT(*) FROM feedback WHERE session_id IN (SELECT value FROM json_each(?)) "
                    "GROUP BY 1",
    }
    for name, sql in plans.items():
        plan = " | ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + sql, (ids,)))
        # every per-session aggregate is an index search, never a scan of a big table
        assert "SEARCH" in plan and "SCAN turns" not in plan and "SCAN samples" not in plan, (name, plan)
    started = time.perf_counter()
    page = store.session_summaries(limit=100)
    detail = store.session_detail("s1499")
    elapsed = time.perf_counter() - started
    assert page["total"] == 1500 and len(page["sessions"]) == 100 and page["sessions"][0]["id"] == "s1499"
    assert page["sessions"][0]["samples"]["pending"] == 8 and page["sessions"][0]["judged"] == 8
    assert len(detail["turn_rows"]) == 8 and detail["turn_rows"][0]["prompt_tokens"] == 50
    assert elapsed < 2.0, elapsed  # about 10 ms on a 2-core machine


# --- the command line on a store file -------------------------------------------------------------------

def test_cli_sessions_table_detail_and_json(tmp_path, capsys):
    from slime.conversation.__main__ import main

    path = tmp_path / "store.db"
    with ConversationStore(path) as s:
        fill(s)
    assert main(["sessions", "--store", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "sessions 1-3 of 3, most recent first"
    assert lines[1].split()[:3] == ["SESSION", "SOURCE", "LAST"]
    assert [line.split()[0] for line in lines[2:]] == ["c", "b", "a"]
    assert "done (idle)" in lines[3] and "1/1/1" in lines[4] and "+0.00" in lines[4]

    assert main(["inspect_sessions", "--store", str(path), "--active", "--limit", "1", "--offset", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "active sessions 2-2 of 2, most recent first" and lines[2].split()[0] == "a"

    assert main(["sessions", "--store", str(path), "--session", "a"]) == 0
    out = capsys.readouterr().out
    assert "judged     3 (1 failed)" in out and "1 pending, 1 in batch, 1 trained" in out
    assert "excluded: judge_failed" in out and "[tool calls: get_weather]" in out and "teacher_for_turn" in out
    assert "feedback on turn 2: rating -1 meh" in out and "feedback on the session: in general" in out

    assert main(["sessions", "--store", str(path), "--json"]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["sessions"]] == ["c", "b", "a"]
    assert main(["sessions", "--store", str(path), "--session", "b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["turn_rows"][0]["exclusion_reason"] == "neutral"


def test_cli_sessions_errors(tmp_path, capsys):
    from slime.conversation.__main__ import main

    path = tmp_path / "store.db"
    ConversationStore(path).close()
    assert main(["sessions", "--store", str(path)]) == 0
    assert "no sessions" in capsys.readouterr().out
    assert main(["sessions", "--store", str(path), "--session", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert main(["sessions", "--store", str(tmp_path / "missing.db")]) == 2
    assert main(["sessions", "--store", str(path), "--url", "http://127.0.0.1:9"]) == 2
    assert main(["sessions", "--store", str(path), "--limit", "0"]) == 2
    assert main(["sessions", "--url", "http://127.0.0.1:9"]) == 2
    assert "cannot reach" in capsys.readouterr().err


def test_cli_sessions_from_url_sends_key_and_quotes_ids(tmp_path, capsys, monkeypatch):
    from helpers.fake_http import fake_json_server
    from slime.conversation.__main__ import main

    path = tmp_path / "store.db"
    with ConversationStore(path) as s:
        fill(s)
        page, detail = s.session_summaries(limit=2, offset=1, active_only=True), s.session_detail("a")
    monkeypatch.setenv("OPENCLAW_PROXY_API_KEY", "from-env")
    with fake_json_server(lambda p: (200, detail if p.startswith("/v1/sessions/") else page)) as (url, seen):
        assert main(["sessions", "--url", url, "--limit", "2", "--offset", "1", "--active"]) == 0
        assert main(["sessions", "--url", url, "--session", "team/a b", "--api-key", "flag"]) == 0
    assert seen == [("/v1/sessions?limit=2&offset=1&active=1", "Bearer from-env"),
                    ("/v1/sessions/team%2Fa%20b", "Bearer flag")]
    out = capsys.readouterr().out
    assert "active sessions 2-2 of 2" in out and "session    a" in out


# --- verbose logs --------------------------------------------------------------------------------------

def test_log_level_from_environment():
    from slime.conversation.proxy import resolve_log_level

    assert resolve_log_level("info", {}) == (logging.INFO, "log_level")
    assert resolve_log_level("warning", {}) == (logging.WARNING, "log_level")
    assert resolve_log_level("info", {"OPENCLAW_DEBUG": "1"}) == (logging.DEBUG, "OPENCLAW_DEBUG")
    assert resolve_log_level("info", {"OPENCLAW_DEBUG": "0"}) == (logging.INFO, "log_level")
    assert resolve_log_level("info", {"ROLLOUT_LOG_LEVEL": "debug"}) == (logging.DEBUG, "ROLLOUT_LOG_LEVEL")
    assert resolve_log_level("debug", {"ROLLOUT_LOG_LEVEL": "WARN"}) == (logging.WARNING, "ROLLOUT_LOG_LEVEL")
    assert resolve_log_level("info", {"ROLLOUT_LOG_LEVEL": " "}) == (logging.INFO, "log_level")
    assert resolve_log_level("info", {"OPENCLAW_DEBUG": "true", "ROLLOUT_LOG_LEVEL": "ERROR"})[0] == logging.DEBUG
    with pytest.raises(ValueError, match="ROLLOUT_LOG_LEVEL"):
        resolve_log_level("info", {"ROLLOUT_LOG_LEVEL": "loud"})


def test_classification_is_logged_at_debug_only(caplog, openclaw_captures):
    from slime.conversation.sessions import resolve_meta

    capture = openclaw_captures["01_local_turn1_new_session"]
    with caplog.at_level(logging.INFO, logger="slime.conversation"):
        resolve_meta({}, capture["body"])
    assert not caplog.records
    with caplog.at_level(logging.DEBUG, logger="slime.conversation"):
        resolve_meta({}, capture["body"])
        resolve_meta({"X-Session-Id": "s1", "X-Turn-Type": "side"}, {"messages": [{"role": "user", "content": "hi"}]})
        resolve_meta({}, {"messages": [{"role": "user", "content": "hi"}]})
    first, second, third = (r.getMessage() for r in caplog.records)
    assert "session openclaw:sessA from OpenClaw Runtime line" in first and "main turn: OpenClaw agent" in first
    assert "session s1 from X-Session-Id header; side turn: X-Turn-Type header" in second
    assert "from hash of the opening" in third and "shape not recognised" in third
