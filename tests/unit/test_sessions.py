"""Session / turn-type resolution and next-state matching, on requests the real OpenClaw client sent.

The fixtures in tests/fixtures/openclaw_capture are verbatim captures (`{"_meta": {..., "headers": [[k, v], ...]},
"body": {...}}`; system prompts cut to 2,000 chars) of an unpatched OpenClaw 2026.9.6 talking to a mock server.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from slime.conversation.openclaw_conventions import INTERNAL_CONTEXT_MARKER, message_text
from slime.conversation.sessions import (
    RequestMeta,
    history_fingerprints,
    is_retry,
    message_fingerprint,
    next_state_after,
    resolve_meta,
    strip_internal_context,
    turn_fingerprints,
)

CAPTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw_capture"
TURN1 = "01_local_turn1_new_session.json"
TURN2 = "02_local_turn2_same_session.json"
TOOL_FOLLOWUP = "03_local_tool_result_followup.json"
COMPACTION = "04_gateway_side_compaction_summary.json"
HEARTBEAT = "06_gateway_side_heartbeat.json"


def load_capture(name: str) -> tuple[dict[str, str], dict]:
    data = json.loads((CAPTURE_DIR / name).read_text(encoding="utf-8"))
    return dict(data["_meta"]["headers"]), data["body"]


def messages_of(name: str) -> list[dict]:
    return load_capture(name)[1]["messages"]


def user(text) -> dict:
    return {"role": "user", "content": text}


def assistant(text, tool_calls=None) -> dict:
    return {"role": "assistant", "content": text, **({"tool_calls": tool_calls} if tool_calls else {})}


def tool_result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def internal_context(text: str = "Active exec sessions:\\nnone") -> dict:
    block = f"{INTERNAL_CONTEXT_MARKER}\n{text}\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
    return user([{"type": "text", "text": block}])


def tool_call(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --------------------------------------------------------------------------------------------------------
# the captured OpenClaw requests


@pytest.mark.parametrize("name, session_id, session_source, turn_type, turn_reason", [
    (TURN1, "openclaw:sessA", "runtime", "main", "openclaw-main"),
    (TURN2, "openclaw:sessA", "runtime", "main", "openclaw-main"),
    (TOOL_FOLLOWUP, "openclaw:sessA", "runtime", "main", "openclaw-main"),
    (HEARTBEAT, "openclaw:1f19ceb1-539d-4fdf-848a-f220c2f6025e", "runtime", "side", "openclaw-heartbeat"),
])
def test_captured_requests_are_classified(name, session_id, session_source, turn_type, turn_reason):
    headers, body = load_capture(name)
    meta = resolve_meta(headers, body)
    assert (meta.session_id, meta.session_source, meta.turn_type, meta.turn_reason) == (
        session_id, session_source, turn_type, turn_reason)
    assert meta.explicit_turn_type is False
    assert meta.session_done is False
    assert meta.trace_id == headers["traceparent"][3:35]


def test_captured_compaction_is_a_side_request_with_its_own_session():
    headers, body = load_capture(COMPACTION)
    meta = resolve_meta(headers, body)
    assert (meta.turn_type, meta.turn_reason) == ("side", "openclaw-compaction")
    # The summarisation request carries no Runtime line: it gets a content-hash session, never "unknown".
    assert meta.session_source == "prefix" and meta.session_id.startswith("prefix:")
    assert meta.trace_id == "99cabc23337e1b5befe0c35ade7e21d3"


def test_tool_loop_calls_share_a_trace_id_but_runs_do_not():
    # 01 and 02 are separate agent runs in the same session: same session, different trace ids.
    meta1 = resolve_meta(*load_capture(TURN1))
    meta2 = resolve_meta(*load_capture(TURN2))
    assert meta1.session_id == meta2.session_id
    assert meta1.trace_id != meta2.trace_id


def test_session_survives_compaction():
    # After compaction OpenClaw's first user message is a part list: summary, then the Runtime line.
    _, body = load_capture(TURN2)
    runtime_line = message_text(body["messages"][1]).split("\n\n", 1)[1]
    compacted = dict(body, messages=[
        body["messages"][0],
        {"role": "user", "content": [
            {"text": "The conversation history before this point was compacted into the following summary:\n\n"
                     "<summary>s</summary>"},
            {"text": runtime_line},
        ]},
        {"role": "assistant", "content": "Hello! (reply 4)"},
        {"role": "user", "content": "[Sat 2026-11-21 23:39 UTC] and now?"},
        internal_context(),
    ])
    meta = resolve_meta({}, compacted)
    assert (meta.session_id, meta.session_source, meta.turn_type) == ("openclaw:sessA", "runtime", "main")


def test_user_messages_in_the_main_session_are_not_heartbeats():
    # Heartbeats wake agent:main:main, but by default every direct message lands there too.
    _, body = load_capture(HEARTBEAT)
    system, heartbeat_prompt, ic = body["messages"]
    runtime_line = message_text(heartbeat_prompt).split("\n\n")[-1]
    first_dm = dict(body, messages=[system, user(f"[Sat 2026-11-21 23:50 UTC] book a table\n\n{runtime_line}"), ic])
    meta = resolve_meta({}, first_dm)
    assert (meta.session_id, meta.turn_type, meta.turn_reason) == (
        "openclaw:1f19ceb1-539d-4fdf-848a-f220c2f6025e", "main", "openclaw-main")

    dm_after_heartbeat = dict(body, messages=[
        system, heartbeat_prompt, {"role": "assistant", "content": "NO_REPLY"},
        {"role": "user", "content": "[Sat 2026-11-21 23:55 UTC] what is on my calendar?"}, ic])
    assert resolve_meta({}, dm_after_heartbeat).turn_type == "main"

    # A heartbeat's own tool loop stays side: the message it answers is still the heartbeat prompt.
    heartbeat_tool_loop = dict(body, messages=[
        system, heartbeat_prompt,
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1", "read", '{"path":"HEARTBEAT.md"}')]},
        {"role": "tool", "tool_call_id": "c1", "content": "nothing"}, ic])
    assert resolve_meta({}, heartbeat_tool_loop).turn_reason == "openclaw-heartbeat"


# --------------------------------------------------------------------------------------------------------
# next state


def test_next_turn_is_the_next_state_of_the_previous_one():
    turn1, turn2 = messages_of(TURN1), messages_of(TURN2)
    reply = turn2[2]  # the assistant reply to turn 1, as the client replays it
    assert reply["role"] == "assistant"
    response = {"role": "assistant", "content": reply["content"], "reasoning_content": "thinking..."}
    next_state = next_state_after(turn_fingerprints(turn1, response), turn2)
    # Exactly the user's new message: the internal-context message is not part of the conversation.
    assert next_state == [turn2[3]]
    assert message_text(next_state[0]).endswith("Second turn in session A, do you remember me?")


def test_tool_result_is_the_next_state_despite_the_tool_call_id_rewrite():
    request = messages_of(TOOL_FOLLOWUP)
    assert request[8]["tool_calls"][0]["id"] == "call3bea382a46ea"  # what the client replayed
    prompt = request[:8] + [internal_context()]
    # What the server returned: the original id, differently spaced arguments, no role, content "".
    call = tool_call("call_3bea382a46ea", "exec", '{"command": "echo capture-tool-ok && pwd"}')
    response = {"content": "", "tool_calls": [call]}
    next_state = next_state_after(turn_fingerprints(prompt, response), request)
    assert next_state == [request[9]]
    assert next_state[0]["role"] == "tool" and next_state[0]["content"] == "capture-tool-ok\n/home/user/workspace"


def test_all_parallel_tool_results_are_the_next_state():
    prompt = messages_of(TURN1)
    calls = [tool_call("call_a", "read", '{"path": "a.txt"}'), tool_call("call_b", "read", '{"path": "b.txt"}')]
    response = {"role": "assistant", "content": None, "tool_calls": calls}
    replayed = assistant(None, [tool_call("calla", "read", '{"path":"a.txt"}'),
                                tool_call("callb", "read", '{"path":"b.txt"}')])
    results = [tool_result("calla", "A"), tool_result("callb", "B")]
    history = strip_internal_context(prompt) + [replayed] + results
    turn_fps = turn_fingerprints(prompt, response)
    assert next_state_after(turn_fps, history + [internal_context()]) == results
    # Tool results followed by the user's next message: all of it is the next state.
    user_reply = {"role": "user", "content": "thanks"}
    assert next_state_after(turn_fps, history + [user_reply, internal_context()]) == results + [user_reply]


def test_retry_is_not_a_next_state():
    turn1 = messages_of(TURN1)
    retry = turn1[:-1] + [internal_context("a fresh internal context")]
    response = {"role": "assistant", "content": "Hello! (reply 3)"}
    assert next_state_after(turn_fingerprints(turn1, response), retry) is None
    assert is_retry(history_fingerprints(turn1), retry) is True
    assert is_retry(history_fingerprints(turn1), messages_of(TURN2)) is False
    assert is_retry([], []) is False


def test_parallel_branch_is_not_a_next_state():
    # The request replays a different assistant reply than the one this turn produced.
    turn1, turn2 = messages_of(TURN1), messages_of(TURN2)
    other_branch = {"role": "assistant", "content": "Hi! A different answer."}
    assert next_state_after(turn_fingerprints(turn1, other_branch), turn2) is None


def test_other_conversations_and_rewritten_histories_are_not_next_states():
    turn1, turn2 = messages_of(TURN1), messages_of(TURN2)
    turn_fps = turn_fingerprints(turn1, turn2[2])
    other_session = copy.deepcopy(turn2)
    other_session[1]["content"] = other_session[1]["content"].replace("sessionId=sessA", "sessionId=sessB")
    assert next_state_after(turn_fps, other_session) is None
    compacted = [turn2[0], {"role": "user", "content": [{"text": "<summary>s</summary>"}]}, turn2[3], turn2[4]]
    assert next_state_after(turn_fps, compacted) is None
    assert next_state_after([], turn2) is None


def test_different_tool_arguments_do_not_match():
    prompt = messages_of(TURN1)
    response = {"role": "assistant", "tool_calls": [tool_call("c", "exec", '{"command": "ls"}')]}
    replayed = {"role": "assistant", "content": None, "tool_calls": [tool_call("c", "exec", '{"command": "pwd"}')]}
    request = strip_internal_context(prompt) + [replayed, {"role": "tool", "content": "/"}]
    assert next_state_after(turn_fingerprints(prompt, response), request) is None


def test_fingerprint_ignores_what_clients_rewrite():
    base = {"role": "assistant", "content": "", "tool_calls": [tool_call("call_1", "f", '{"b": 1, "a": [1, 2]}')]}
    same = [
        {"role": "assistant", "content": None, "reasoning_content": "hmm", "name": "bot",
         "tool_calls": [tool_call("call1", "f", '{"a":[1,2],"b":1}')]},
        assistant(None, [{"id": "x", "function": {"name": "f", "arguments": {"a": [1, 2], "b": 1}}}]),
    ]
    for msg in same:
        assert message_fingerprint(msg) == message_fingerprint(base)
    assert message_fingerprint({"role": "developer", "content": "  be nice\n"}) == message_fingerprint(
        {"role": "system", "content": "be nice"})
    as_parts = tool_result("b", [{"type": "text", "text": "x"}])
    assert message_fingerprint(tool_result("a", "x")) == message_fingerprint(as_parts)
    different = [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": "hi", "tool_calls": base["tool_calls"]},
        {"role": "assistant", "tool_calls": [tool_call("call_1", "g", '{"b": 1, "a": [1, 2]}')]},
        {"role": "assistant", "tool_calls": [tool_call("call_1", "f", "not json")]},
    ]
    assert len({message_fingerprint(m) for m in different} | {message_fingerprint(base)}) == len(different) + 1


# --------------------------------------------------------------------------------------------------------
# explicit metadata


def test_headers_win_over_body_and_are_case_insensitive():
    body = {"messages": [user("hi")], "session_id": "from-body", "turn_type": "main", "session_done": True}
    meta = resolve_meta({"X-SESSION-ID": " from-header ", "x-turn-type": "Side", "X-Session-Done": "no"}, body)
    assert (meta.session_id, meta.session_source) == ("from-header", "header")
    assert (meta.turn_type, meta.turn_reason, meta.explicit_turn_type) == ("side", "header", True)
    assert meta.session_done is False


def test_body_keys_win_over_inference():
    headers, body = load_capture(COMPACTION)  # inferred: side compaction
    meta = resolve_meta(headers, dict(body, session_id="s1", turn_type=" MAIN ", session_done="yes"))
    assert (meta.session_id, meta.session_source) == ("s1", "body")
    assert (meta.turn_type, meta.turn_reason, meta.explicit_turn_type) == ("main", "body", True)
    assert meta.session_done is True
    # Blank explicit values count as absent.
    meta = resolve_meta({"X-Session-Id": "  ", "X-Turn-Type": ""}, dict(body, session_id=""))
    assert (meta.session_source, meta.turn_reason, meta.explicit_turn_type) == ("prefix", "openclaw-compaction", False)


@pytest.mark.parametrize("value, expected", [
    ("main", "main"), (" Main\t", "main"), ("side", "side"), ("MAIN-ish", "side"), ("anything", "side"),
])
def test_explicit_turn_type_only_main_is_main(value, expected):
    assert resolve_meta({"X-Turn-Type": value}, {"messages": []}).turn_type == expected


@pytest.mark.parametrize("value, expected", [
    ("1", True), ("true", True), (" TRUE ", True), ("yes", True), ("on", True), (True, True), (1, True),
    ("0", False), ("false", False), ("no", False), ("", False), (None, False), (False, False), ("maybe", False),
    ([], False),
])
def test_session_done_from_body(value, expected):
    assert resolve_meta({}, {"messages": [], "session_done": value}).session_done is expected


@pytest.mark.parametrize("value, expected", [("On", True), ("1", True), ("off", False), ("", False)])
def test_session_done_from_header(value, expected):
    assert resolve_meta({"x-session-done": value}, {"messages": []}).session_done is expected


@pytest.mark.parametrize("traceparent, expected", [
    ("00-a51f775a9c6bfa6911813829977e47f9-de6fc1b1d830351d-01", "a51f775a9c6bfa6911813829977e47f9"),
    (" 00-A51F775A9C6BFA6911813829977E47F9-DE6FC1B1D830351D-00 ", "a51f775a9c6bfa6911813829977e47f9"),
    ("01-a51f775a9c6bfa6911813829977e47f9-de6fc1b1d830351d-01-future", "a51f775a9c6bfa6911813829977e47f9"),
    ("00-a51f775a9c6bfa6911813829977e47f9-de6fc1b1d830351d-01-extra", None),
    ("ff-a51f775a9c6bfa6911813829977e47f9-de6fc1b1d830351d-01", None),
    ("00-00000000000000000000000000000000-de6fc1b1d830351d-01", None),
    ("00-a51f775a9c6bfa6911813829977e47f9-0000000000000000-01", None),
    ("00-a51f775a9c6bfa6911813829977e47f-de6fc1b1d830351d-01", None),
    ("00-g51f775a9c6bfa6911813829977e47f9-de6fc1b1d830351d-01", None),
    ("garbage", None), ("", None),
])
def test_traceparent(traceparent, expected):
    assert resolve_meta({"Traceparent": traceparent}, {"messages": []}).trace_id == expected


def test_no_traceparent():
    assert resolve_meta({}, {"messages": []}).trace_id is None


# --------------------------------------------------------------------------------------------------------
# other clients


def test_generic_client_gets_a_stable_prefix_session_and_is_trained():
    turn1 = {"messages": [{"role": "system", "content": "You are helpful."}, user("What is 2+2?")]}
    turn2 = {"messages": turn1["messages"] + [assistant("4"), user("And 3+3?")]}
    other = {"messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hello"}]}
    meta1, meta2, meta_other = (resolve_meta({}, body) for body in (turn1, turn2, other))
    assert meta1 == RequestMeta(session_id=meta1.session_id, session_source="prefix", turn_type="main",
                                turn_reason="unclassified", explicit_turn_type=False, session_done=False, trace_id=None)
    assert meta1.session_id.startswith("prefix:") and meta1.session_id == meta2.session_id
    assert meta_other.session_id != meta1.session_id
    assert "unknown" not in {meta1.session_id, meta_other.session_id}


@pytest.mark.parametrize("messages", [
    # Open WebUI style: the task is in the last user message.
    [{"role": "user", "content": "what is rust?"}, {"role": "assistant", "content": "A language."},
     user("### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Output:")],
    # System-prompt style.
    [{"role": "system", "content": "You write a short title for the conversation below. Reply with the title only."},
     {"role": "user", "content": "User: what is rust?\nAssistant: A language."}],
    [{"role": "system", "content": "You are helpful."}, user("Summarize this conversation in one sentence:\n...")],
    # NextChat style.
    [{"role": "user", "content": "Summarize a brief topic of the conversation in 4-5 words, without punctuation."}],
])
def test_title_like_requests_are_side(messages):
    meta = resolve_meta({}, {"messages": messages})
    assert (meta.turn_type, meta.turn_reason, meta.explicit_turn_type) == ("side", "title-like", False)


def test_ordinary_requests_that_mention_titles_stay_main():
    essay = {"messages": [{"role": "user", "content": "Suggest a title for my essay about whales."}]}
    assert resolve_meta({}, essay).turn_reason == "unclassified"
    with_tools = {"messages": [{"role": "user", "content": "Generate a title for this chat"}],
                  "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}
    assert resolve_meta({}, with_tools).turn_type == "main"


def test_compaction_recognised_by_its_user_message_alone():
    body = {"messages": [user("<conversation>\n[User]: hi\n</conversation>\n\nSummarize the prefix.")]}
    assert resolve_meta({}, body).turn_reason == "openclaw-compaction"


# --------------------------------------------------------------------------------------------------------
# building blocks and junk


def test_strip_internal_context_only_drops_the_trailing_message():
    turn2 = messages_of(TURN2)
    stripped = strip_internal_context(turn2)
    assert stripped == turn2[:-1] and len(turn2) == 5  # input untouched
    quoted = {"role": "user", "content": f"{INTERNAL_CONTEXT_MARKER} quoted by the user"}
    assert strip_internal_context([quoted, assistant("ok")]) == [quoted, assistant("ok")]
    # Only a user message counts.
    assistant_with_marker = {"role": "assistant", "content": INTERNAL_CONTEXT_MARKER}
    assert strip_internal_context([assistant_with_marker]) == [assistant_with_marker]
    assert strip_internal_context(None) == [] and strip_internal_context("junk") == []


JUNK_BODIES = [
    None, [], "text", 5, {}, {"messages": None}, {"messages": "hello"}, {"messages": {"role": "user"}},
    {"messages": [1, None, "x", [], {"role": 5, "content": {"a": 1}}, {"role": "user", "content": 3.5},
                  {"role": "assistant", "tool_calls": "nope"},
                  {"role": "assistant", "tool_calls": [None, 1, {"function": 3}]}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}], "tools": "x", "session_id": {"a": 1},
     "turn_type": ["main"], "session_done": {"x": 1}},
]


@pytest.mark.parametrize("body", JUNK_BODIES)
def test_junk_never_raises(body):
    for headers in ({}, {"X-Session-Id": None, 5: b"bytes"}, [("traceparent", "x"), ("bad",)], None, "junk"):
        meta = resolve_meta(headers, body)  # type: ignore[arg-type]
        assert meta.session_id and meta.session_id != "unknown"
        assert meta.session_source in {"prefix", "runtime"}  # junk is never an explicit session
        assert meta.turn_type in {"main", "side"}
    messages = body.get("messages") if isinstance(body, dict) else body
    fps = history_fingerprints(messages)  # type: ignore[arg-type]
    assert all(isinstance(fp, str) for fp in fps)
    assert next_state_after(turn_fingerprints(messages, {"content": None}), messages) is None  # type: ignore[arg-type]
    assert next_state_after(["x"], messages) is None  # type: ignore[arg-type]
    is_retry(fps, messages)  # type: ignore[arg-type]
    for msg in messages if isinstance(messages, list) else []:
        message_fingerprint(msg)


def test_openclaw_system_prompt_date_change_keeps_the_history_matching():
    """After midnight OpenClaw's system prompt has a new `Current date`; the turn before must still match."""
    from slime.conversation.sessions import next_state_after, turn_fingerprints

    def system(day):
        return {"role": "system", "content": "<!-- openclaw:attempt:STABLE -->\nYou are a personal assistant running "
                "inside OpenClaw.\n<!-- /openclaw:attempt:STABLE -->\n<!-- openclaw:attempt:DYNAMIC -->\n"
                f"Current date: 2026-11-{day}\n<!-- /openclaw:attempt:DYNAMIC -->"}

    user = {"role": "user", "content": "[Sat 2026-11-21 23:59 UTC] hi"}
    reply = {"role": "assistant", "content": "hello"}
    fps = turn_fingerprints([system(21), user], reply)
    nxt = {"role": "user", "content": "[Sun 2026-11-22 00:01 UTC] thanks"}
    assert next_state_after(fps, [system(22), user, reply, nxt]) == [nxt]
    plain = {"role": "system", "content": "Current date: 2026-11-22"}  # other clients: the whole text counts
    assert next_state_after(turn_fingerprints([{"role": "system", "content": "Current date: 2026-11-21"}, user],
                                              reply), [plain, user, reply, nxt]) is None


def test_reply_replayed_without_its_reasoning_still_matches():
    from slime.conversation.sessions import next_state_after, turn_fingerprints

    user = {"role": "user", "content": "hi"}
    said = {"role": "assistant", "content": "<think>the user greets me</think>\n\nHello!"}
    nxt = {"role": "user", "content": "thanks"}
    fps = turn_fingerprints([user], said)
    assert next_state_after(fps, [user, {"role": "assistant", "content": "Hello!"}, nxt]) == [nxt]
    assert next_state_after(fps, [user, said, nxt]) == [nxt]
    assert next_state_after(fps, [user, {"role": "assistant", "content": "Bye!"}, nxt]) is None
