"""The client's tags (X-Session-Id / X-Turn-Type / X-Turn-Id, as the rl-training-headers OpenClaw plugin sends them)
against inference from the same body: resolve_meta keeps both, HeaderCheck counts where they disagree.

Bodies are the verbatim OpenClaw captures of tests/fixtures/openclaw_capture (see test_sessions.py)."""

from __future__ import annotations

import copy

from slime.conversation.__main__ import format_stats
from slime.conversation.header_check import HeaderCheck, same_session
from slime.conversation.sessions import resolve_meta
from unit.test_sessions import COMPACTION, HEARTBEAT, TOOL_FOLLOWUP, TURN1, load_capture, user


def plugin_headers(session: str, turn_type: str, reason: str, turn_id: str) -> dict:
    return {"X-Session-Id": session, "X-Turn-Type": turn_type, "X-Turn-Reason": reason, "X-Turn-Id": turn_id}


def test_untagged_requests_are_inferred_and_not_checked():
    headers, body = load_capture(TURN1)
    meta = resolve_meta(headers, body)
    assert meta.inferred is None and meta.turn_id is None and meta.client_reason is None
    check = HeaderCheck()
    assert check.observe(meta) is None
    assert check.snapshot()["requests"] == 0


def test_tagged_request_keeps_inference_beside_the_tags():
    _, body = load_capture(COMPACTION)
    meta = resolve_meta(plugin_headers("openclaw:sessG", "side", "compaction", "compaction-1"), body)
    # the tags win ...
    assert (meta.session_id, meta.session_source, meta.turn_type, meta.turn_reason) == \
        ("openclaw:sessG", "header", "side", "header")
    assert (meta.turn_id, meta.client_reason, meta.trace_id) == ("compaction-1", "compaction", "compaction-1")
    # ... and inference is what an untagged request would have got
    untagged = resolve_meta({}, body)
    assert (meta.inferred.session_id, meta.inferred.session_source, meta.inferred.turn_type,
            meta.inferred.turn_reason) == (untagged.session_id, "prefix", "side", "openclaw-compaction")


def test_turn_id_wins_over_traceparent_for_the_trace_id():
    # OpenClaw sends a traceparent too, whose trace-id is not the plugin's run: the explicit turn id wins
    trace = "a51f775a9c6bfa6911813829977e47f9"
    traceparent = f"00-{trace}-de6fc1b1d830351d-01"
    meta = resolve_meta({"traceparent": traceparent, "X-Turn-Id": "run-7"}, {"messages": []})
    assert (meta.trace_id, meta.turn_id) == ("run-7", "run-7")
    assert resolve_meta({"traceparent": traceparent}, {"messages": []}).trace_id == trace


def test_a_plugin_conversation_main_turns_compaction_and_heartbeat():
    """The e2e test's sequence on captured bodies: two main turns (the second a tool follow-up), a compaction
    and a heartbeat, all tagged with one session. Inference agrees on every main/side; on the session it puts
    the compaction (no Runtime line) on a prefix: session, so the tagged session is split once."""
    check = HeaderCheck()
    session = "openclaw:sessA"
    for name, turn_type, reason in ((TURN1, "main", "user"), (TOOL_FOLLOWUP, "main", "user"),
                                    (COMPACTION, "side", "compaction"), (HEARTBEAT, "side", "heartbeat")):
        _, body = load_capture(name)
        if name == HEARTBEAT:  # the captured heartbeat woke another session; here it wakes ours
            body = copy.deepcopy(body)
            for msg in body["messages"]:
                if isinstance(msg.get("content"), str):
                    msg["content"] = msg["content"].replace("sessionId=1f19ceb1-539d-4fdf-848a-f220c2f6025e",
                                                            "sessionId=sessA")
        check.observe(resolve_meta(plugin_headers(session, turn_type, reason, f"run-{name[:2]}"), body))
    snap = check.snapshot()
    assert snap["requests"] == 4
    assert snap["turn_type"] == {"agree": 4, "disagree": 0, "disagreements": {}}
    assert snap["session"] == {"agree": 3, "disagree": 1, "split_sessions": 1, "merged_sessions": 0}
    [example] = snap["recent_disagreements"]
    assert example["disagree"] == ["session"]
    assert example["header"] == {"session_id": session, "turn_type": "side", "reason": "compaction",
                                 "turn_id": "run-04"}
    assert example["inferred"]["session_source"] == "prefix"


def test_turn_type_disagreements_are_counted_by_reason_pair():
    check = HeaderCheck(max_examples=2)
    # a system-originated run whose body looks like a user's turn: the plugin says side, inference main
    _, body = load_capture(TURN1)
    for i in range(3):
        check.observe(resolve_meta(plugin_headers("openclaw:sessA", "side", "cron", f"run-{i}"), body))
    # an unrecognised body the client calls side (inference trains it as main)
    check.observe(resolve_meta({"X-Turn-Type": "side"}, {"messages": [user("hello")]}))
    snap = check.snapshot()
    assert snap["turn_type"]["agree"] == 0 and snap["turn_type"]["disagree"] == 4
    assert snap["turn_type"]["disagreements"] == {"side:cron -> main:openclaw-main": 3,
                                                  "side:header -> main:unclassified": 1}
    assert len(snap["recent_disagreements"]) == 2  # bounded: the most recent ones
    assert snap["recent_disagreements"][-1]["header"]["session_id"] is not None
    # only the turn type was tagged on the last one: its session was inferred, so not compared
    assert snap["session"]["agree"] + snap["session"]["disagree"] == 3


def test_two_conversations_with_the_same_opening_are_merged_by_inference():
    check = HeaderCheck()
    body = {"messages": [{"role": "system", "content": "You are helpful."}, user("hi")]}
    for session in ("chat-1", "chat-2"):
        check.observe(resolve_meta({"X-Session-Id": session}, body))
    snap = check.snapshot()["session"]
    assert snap == {"agree": 0, "disagree": 2, "split_sessions": 0, "merged_sessions": 1}


def test_session_ids_match_with_or_without_the_runtime_prefix():
    assert same_session("openclaw:sessA", "openclaw:sessA")
    assert same_session("sessA", "openclaw:sessA")  # a client that sends OpenClaw's bare id
    assert not same_session("sessA", "openclaw:sessB")
    assert not same_session("sessA", "prefix:abc")


def test_memory_stays_bounded():
    check = HeaderCheck(max_sessions=8, max_ids_per_session=2)
    for i in range(100):
        check.observe(resolve_meta({"X-Session-Id": f"s{i}"}, {"messages": [user(f"opening {i}")]}))
    assert len(check.by_header) == 8 and len(check.by_inferred) == 8
    assert check.snapshot()["session"]["disagree"] == 100


def test_stats_table_shows_the_check():
    check = HeaderCheck()
    _, body = load_capture(COMPACTION)
    check.observe(resolve_meta(plugin_headers("openclaw:sessG", "side", "compaction", "c1"), body))
    text = format_stats({"proxy": {"method": "rl", "header_check": check.snapshot()}})
    assert "1 tagged request(s)" in text
    assert "1 agree, 0 disagree" in text
    assert "0 agree, 1 disagree (1 split, 0 merged)" not in text  # one session id seen: not split
    assert "0 agree, 1 disagree (0 split, 0 merged)" in text
