"""OpenClaw's message conventions (slime.conversation.openclaw_conventions), pinned on the requests the real,
unpatched client sent (tests/fixtures/openclaw_capture) and on the envelope forms its documentation lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slime.conversation import openclaw_conventions as oc
from slime.conversation.openclaw_conventions import (
    INTERNAL_CONTEXT_END_MARKER,
    INTERNAL_CONTEXT_MARKER,
    clean_user_text,
    content_text,
    is_internal_context,
    message_text,
    runtime_fields,
    strip_runtime_line,
    strip_timestamp_prefix,
)

CAPTURE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "openclaw_capture"
CAPTURES = sorted(path.name for path in CAPTURE_DIR.glob("*.json"))
MAIN_LINE = ["01_local_turn1_new_session.json", "02_local_turn2_same_session.json",
             "03_local_tool_result_followup.json"]
HEARTBEAT = "06_gateway_side_heartbeat.json"


def messages_of(name: str) -> list[dict]:
    return json.loads((CAPTURE_DIR / name).read_text(encoding="utf-8"))["body"]["messages"]


# --------------------------------------------------------------------------------------------------------
# internal context


@pytest.mark.parametrize("name", MAIN_LINE + [HEARTBEAT])
def test_every_captured_agent_request_ends_with_exactly_one_internal_context_message(name):
    messages = messages_of(name)
    assert [is_internal_context(m) for m in messages] == [False] * (len(messages) - 1) + [True]
    text = message_text(messages[-1])
    assert text.startswith(INTERNAL_CONTEXT_MARKER) and text.endswith(INTERNAL_CONTEXT_END_MARKER)


def test_the_captured_compaction_request_has_no_internal_context():
    assert not any(is_internal_context(m) for m in messages_of("04_gateway_side_compaction_summary.json"))


def test_only_a_user_message_that_starts_with_the_marker_is_internal_context():
    block = f"{INTERNAL_CONTEXT_MARKER}\nscratch\n{INTERNAL_CONTEXT_END_MARKER}"
    assert is_internal_context({"role": "user", "content": [{"type": "text", "text": block}]})
    assert is_internal_context({"role": "user", "content": "  \n" + block})  # leading white space
    assert is_internal_context({"content": block})  # no role: a user message, as upstream reads it
    assert is_internal_context({"role": " User ", "content": block})
    assert not is_internal_context({"role": "assistant", "content": block})  # the model quoting it
    assert not is_internal_context({"role": "tool", "content": block})
    assert not is_internal_context({"role": "user", "content": f"what does {INTERNAL_CONTEXT_MARKER} mean?"})
    for junk in (None, "text", 5, [], {"role": 5, "content": block}):
        assert not is_internal_context(junk)


# --------------------------------------------------------------------------------------------------------
# the timestamp envelope


def captured_user_texts() -> list[str]:
    texts = []
    for name in CAPTURES:
        for message in messages_of(name):
            if message["role"] == "user" and not is_internal_context(message):
                texts.append(message_text(message))
    return texts


def test_every_captured_user_envelope_is_stripped_and_nothing_else():
    stamped = [text for text in captured_user_texts() if text.startswith("[Sat 2026-11-21 ")]
    assert len(stamped) >= 5
    for text in stamped:
        stripped = strip_timestamp_prefix(text)
        assert stripped == text.split("] ", 1)[1]
    # The heartbeat prompt and the compaction prompt carry no envelope and stay as they are.
    for text in captured_user_texts():
        if not text.startswith("[Sat "):
            assert strip_timestamp_prefix(text) == text.lstrip()


def test_clean_user_text_on_the_captured_first_message():
    first = message_text(messages_of("01_local_turn1_new_session.json")[1])
    assert first.startswith("[Sat 2026-11-21 23:35 UTC] ") and "\n\nRuntime: agent=main | " in first
    assert clean_user_text(first) == "Hi there, this is turn one of session A."
    later = message_text(messages_of("03_local_tool_result_followup.json")[7])
    assert clean_user_text(later) == "USE_TOOL: please run a shell command to show the working directory."


@pytest.mark.parametrize("text", [
    "[Sat 2026-11-21 23:35 UTC] hello",  # captured: a direct agent prompt
    "[Mon 2026-11-23 08:00:12 UTC] hello",  # with seconds
    "  [Sat 2026-11-21 23:35 UTC]   hello",
    # channel messages name the channel and the sender before the date (OpenClaw's date-time docs)
    "[WhatsApp +1555 Sun 2026-01-18 00:19:42 PST] hello",
    "[Signal Alice +1555 2026-01-18 06:19 GMT+1] hello",
    "[Signal Alice +1555 +2m 2026-01-18T05:19Z] hello",
    "[Telegram Bob (@bob) 2026-01-18 00:19 America/New_York] hello",
])
def test_timestamp_envelopes_are_stripped(text):
    assert strip_timestamp_prefix(text) == "hello"


@pytest.mark.parametrize("text", [
    "[not a timestamp] hi",
    "[draft] my essay on 2026-01-18 12:00 deadlines",  # the date is outside the brackets
    "[1] first item",
    "[URGENT] follow the heartbeat monitor",
    "hello [Sat 2026-11-21 23:35 UTC]",  # not at the start
    "[[Sat 2026-11-21 23:35 UTC]] nested",
])
def test_the_users_own_brackets_stay(text):
    assert strip_timestamp_prefix(text) == text


def test_only_the_first_envelope_goes():
    assert strip_timestamp_prefix("[Sat 2026-11-21 23:35 UTC] [Sat 2026-11-21 23:36 UTC] x") == (
        "[Sat 2026-11-21 23:36 UTC] x")


# --------------------------------------------------------------------------------------------------------
# the Runtime line


def test_runtime_fields_of_the_captured_sessions():
    fields = runtime_fields(message_text(messages_of("01_local_turn1_new_session.json")[1]))
    assert fields["agent"] == "main" and fields["session"] == "agent:main:explicit:sessa"
    assert fields["sessionId"] == "sessA" and fields["host"] == "vm" and fields["shell"] == "bash"
    assert fields["os"] == "Linux 6.18.44-fc-v595 (x64)"  # values may hold spaces; " | " separates fields
    heartbeat = runtime_fields(message_text(messages_of(HEARTBEAT)[1]))
    assert (heartbeat["session"], heartbeat["sessionId"]) == (
        "agent:main:main", "1f19ceb1-539d-4fdf-848a-f220c2f6025e")
    # Replayed verbatim: every request of session A carries the same line.
    assert {runtime_fields(message_text(messages_of(name)[1]))["sessionId"] for name in MAIN_LINE} == {"sessA"}


def test_runtime_line_after_compaction_is_found_and_stripped():
    # After compaction the first user message is a part list (no "type"): the summary, then the Runtime line.
    runtime_line = message_text(messages_of("01_local_turn1_new_session.json")[1]).split("\n\n", 1)[1]
    compacted = {"role": "user", "content": [
        {"text": "The conversation history before this point was compacted into the following summary:\n\n"
                 "<summary>s</summary>"},
        {"text": runtime_line}]}
    text = message_text(compacted)
    assert runtime_fields(text)["sessionId"] == "sessA"
    assert clean_user_text(text).endswith("<summary>s</summary>") and "Runtime:" not in clean_user_text(text)


def test_runtime_line_only_at_the_start_of_a_line():
    assert runtime_fields("no runtime here") is None
    assert runtime_fields("print 'Runtime: agent=x | session=y | sessionId=z' please") is None
    assert runtime_fields("Runtime: agent=main | sessionId=s") == {"agent": "main", "sessionId": "s"}
    assert strip_runtime_line("a\nRuntime: agent=main | sessionId=s\nb") == "a\n\nb"
    assert clean_user_text("[Sat 2026-11-21 23:35 UTC] hello\n\nRuntime: agent=main | sessionId=s") == "hello"


# --------------------------------------------------------------------------------------------------------
# content parts -> text


def test_content_text_shapes():
    assert message_text({"role": "user", "content": "plain"}) == "plain"
    assert message_text({"role": "assistant", "content": None}) == ""
    assert message_text({"role": "user"}) == ""
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:..."}}, {"text": "b"}, "c"]
    assert message_text({"role": "user", "content": parts}) == "a\nb\nc"  # as the engine renders them
    assert message_text({"role": "user", "content": parts}, separator=" ") == "a b c"
    assert content_text({"type": "text", "text": "single part"}) == "single part"
    for junk in (None, 5, "str", [], {"content": 7}, {"content": [None, 3, {"type": "text", "text": 9}]}):
        assert message_text(junk) == ""
    assert content_text(7) == "" and content_text(None) == ""


def test_the_parts_join_as_the_engine_joins_them():
    from slime.engine.chat_parsing import TEXT_PART_SEPARATOR, normalize_messages

    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    (normalized,) = normalize_messages([{"role": "user", "content": parts}])
    assert normalized["content"] == content_text(parts) == f"first{TEXT_PART_SEPARATOR}second"


def test_sessions_and_judges_use_these_definitions():
    from slime.conversation import sessions, teacher
    from slime.conversation.judges import hint_rules, prompts, rules, voting

    assert sessions.message_text is oc.message_text and sessions.is_internal_context is oc.is_internal_context
    for module in (rules, hint_rules, prompts):
        assert module.clean_user_text is oc.clean_user_text and module.is_internal_context is oc.is_internal_context
    assert voting.message_text is oc.message_text
    assert teacher.content_text is oc.content_text and teacher.is_internal_context is oc.is_internal_context
