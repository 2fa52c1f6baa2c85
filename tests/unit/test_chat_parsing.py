import copy
import json
import random
import re

import pytest

from slime.engine.chat_parsing import (
    ChatInputError,
    StreamingToolCallParser,
    normalize_messages,
    parse_tool_calls,
    split_reasoning,
)

CALL_ID = re.compile(r"^call_[0-9a-f]{24}$")


def block(name, arguments=None, **extra):
    payload = {"name": name, **extra}
    if arguments is not None:
        payload["arguments"] = arguments
    return "<tool_call>\n" + json.dumps(payload, ensure_ascii=False) + "\n</tool_call>"


def functions(calls):
    return [c["function"] for c in calls]


# --------------------------------------------------------------------------------------------------
# normalize_messages
# --------------------------------------------------------------------------------------------------


def openclaw_request():
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "exec", "arguments": '{"command": "ls -la", "cwd": "/tmp"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
    ]


def test_normalize_openclaw_request():
    messages = openclaw_request()
    original = copy.deepcopy(messages)
    out = normalize_messages(messages)
    assert messages == original  # input untouched
    assert out == [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "exec", "arguments": {"command": "ls -la", "cwd": "/tmp"}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
    ]
    # The output shares no mutable state with the input.
    out[2]["tool_calls"][0]["function"]["name"] = "changed"
    assert messages == original


def test_normalize_joins_text_parts_with_newline():
    out = normalize_messages(
        [{"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}]
    )
    assert out[0]["content"] == "first\nsecond"


def test_normalize_empty_part_list_is_empty_string():
    assert normalize_messages([{"role": "user", "content": []}])[0]["content"] == ""


def test_normalize_developer_becomes_system():
    out = normalize_messages([{"role": "developer", "content": "rules"}, {"role": "user", "content": "hi"}])
    assert out[0] == {"role": "system", "content": "rules"}


def test_normalize_keeps_extra_fields_and_unicode():
    out = normalize_messages([{"role": "user", "content": "héllo 世界 🚀", "name": "bob"}])
    assert out == [{"role": "user", "content": "héllo 世界 🚀", "name": "bob"}]


def test_normalize_tool_call_arguments():
    def args_after(arguments):
        tool_calls = [{"function": {"name": "f", "arguments": arguments}}]
        message = {"role": "assistant", "content": "", "tool_calls": tool_calls}
        return normalize_messages([message])[0]["tool_calls"][0]["function"]["arguments"]

    assert args_after('{"x": 1}') == {"x": 1}
    assert args_after({"x": 1}) == {"x": 1}
    assert args_after("not json") == "not json"
    assert args_after("[1, 2]") == "[1, 2]"  # valid JSON but not an object: left as the string


def test_normalize_assistant_null_tool_calls_allowed():
    out = normalize_messages([{"role": "assistant", "content": "hi", "tool_calls": None}])
    assert out[0]["content"] == "hi"


def test_normalize_tool_content_parts_allowed():
    out = normalize_messages([{"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]}])
    assert out[0]["content"] == "ok"


@pytest.mark.parametrize(
    "messages, param",
    [
        ([], "messages"),
        (None, "messages"),
        ({"role": "user", "content": "hi"}, "messages"),
        (["hi"], "messages[0]"),
        ([{"role": "user", "content": "hi"}, {"content": "x"}], "messages[1].role"),
        ([{"role": "function", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": {"text": "x"}}], "messages[0].content"),
        ([{"role": "user", "content": None}], "messages[0].content"),
        ([{"role": "user"}], "messages[0].content"),
        ([{"role": "system", "content": None}], "messages[0].content"),
        ([{"role": "developer"}], "messages[0].content"),
        ([{"role": "tool", "tool_call_id": "c", "content": None}], "messages[0].content"),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[0].content[0].text"),
        ([{"role": "assistant", "content": None, "tool_calls": {"a": 1}}], "messages[0].tool_calls"),
        ([{"role": "assistant", "content": None, "tool_calls": ["x"]}], "messages[0].tool_calls[0]"),
        ([{"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}], "messages[0].tool_calls[0].function"),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "{}"}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
        (
            [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": 1}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
    ],
)
def test_normalize_validation_errors(messages, param):
    with pytest.raises(ChatInputError) as excinfo:
        normalize_messages(messages)
    assert excinfo.value.param == param


@pytest.mark.parametrize("part_type", ["image_url", "input_audio", "file"])
def test_normalize_non_text_parts_not_supported(part_type):
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": part_type, part_type: {}}]}]
    with pytest.raises(ChatInputError, match="not supported") as excinfo:
        normalize_messages(messages)
    assert excinfo.value.param == "messages[0].content[1]"


def test_chat_input_error_is_value_error():
    assert issubclass(ChatInputError, ValueError)
    assert ChatInputError("m").param is None


# --------------------------------------------------------------------------------------------------
# parse_tool_calls
# --------------------------------------------------------------------------------------------------


def test_parse_plain_text_has_no_calls():
    assert parse_tool_calls("  just an answer, a < b > c  \n") == ("just an answer, a < b > c", [])


def test_parse_single_call():
    content, calls = parse_tool_calls(block("exec", {"command": "ls"}))
    assert content == ""
    assert len(calls) == 1
    assert CALL_ID.match(calls[0]["id"])
    assert calls[0]["type"] == "function"
    assert calls[0]["function"] == {"name": "exec", "arguments": '{"command": "ls"}'}


def test_parse_text_before_and_multiple_calls():
    text = "Let me check.\n\n" + block("read", {"path": "a"}) + "\n" + block("read", {"path": "b"}) + "\n"
    content, calls = parse_tool_calls(text)
    assert content == "Let me check."
    assert functions(calls) == [
        {"name": "read", "arguments": '{"path": "a"}'},
        {"name": "read", "arguments": '{"path": "b"}'},
    ]
    assert len({c["id"] for c in calls}) == 2


def test_parse_arguments_forms():
    _, calls = parse_tool_calls(block("a") + block("b", "raw string") + block("c", {"k": "日本"}))
    assert functions(calls) == [
        {"name": "a", "arguments": "{}"},
        {"name": "b", "arguments": "raw string"},
        {"name": "c", "arguments": '{"k": "日本"}'},  # ensure_ascii=False keeps unicode readable
    ]


def test_parse_null_arguments_means_empty():
    _, calls = parse_tool_calls('<tool_call>{"name": "a", "arguments": null}</tool_call>')
    assert functions(calls) == [{"name": "a", "arguments": "{}"}]


@pytest.mark.parametrize(
    "body",
    [
        "{not json}",
        '{"arguments": {}}',  # no name
        '{"name": 3}',  # name not a string
        '["name", "x"]',  # not an object
        '{"name": "f", "arguments": [1]}',  # arguments neither object nor string
        "",
    ],
)
def test_parse_invalid_block_stays_as_content(body):
    raw = f"<tool_call>{body}</tool_call>"
    content, calls = parse_tool_calls("before " + raw + " " + block("ok"))
    assert content == "before " + raw
    assert functions(calls) == [{"name": "ok", "arguments": "{}"}]


def test_parse_unterminated_block_stays_as_content():
    text = block("done") + "\nthen <tool_call>\n{\"name\": \"cut\", \"argu"
    content, calls = parse_tool_calls(text)
    assert content == 'then <tool_call>\n{"name": "cut", "argu'
    assert functions(calls) == [{"name": "done", "arguments": "{}"}]


def test_parse_stray_close_tag_is_content():
    assert parse_tool_calls("a </tool_call> b") == ("a </tool_call> b", [])


# --------------------------------------------------------------------------------------------------
# StreamingToolCallParser
# --------------------------------------------------------------------------------------------------


def run_stream(chunks):
    parser = StreamingToolCallParser()
    events = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.finish())
    return events


def summarize(events):
    """(content joined, [(index, function)]) — ids are random, so compare functions only."""
    content = "".join(e[1] for e in events if e[0] == "content")
    calls = [(e[1], e[2]["function"]) for e in events if e[0] == "tool_call"]
    for e in events:
        if e[0] == "tool_call":
            assert CALL_ID.match(e[2]["id"]) and e[2]["type"] == "function"
    return content, calls


def random_chunks(text, rng):
    chunks, pos = [], 0
    while pos < len(text):
        n = rng.randint(1, 15)
        chunks.append(text[pos : pos + n])
        pos += n
    return chunks


STREAM_CASES = {
    "plain": "Hello world, nothing to call.",
    "lt_not_tag": "if a < b and b <= c then <tool or <tool_cal x> stays",
    "ends_with_partial_tag": "answer is <tool_ca",
    "ends_with_lt": "x <",
    "single": block("exec", {"command": "ls"}),
    "text_then_calls": "I'll look.\n" + block("read", {"path": "α.txt"}) + "\n" + block("read", {"path": "β"}),
    "invalid_then_valid": "<tool_call>{oops}</tool_call>\n" + block("ok", {"n": 1}) + " tail",
    "unterminated": "text " + block("a") + "\n<tool_call>\n{\"name\": \"b\", ",
    "unicode": "思考中… 🚀 " + block("搜索", {"查询": "天气 ☀️"}) + " fin",
    "string_args": block("f", '{"already": "json"}'),
    "nested_open_in_body": "<tool_call> junk <tool_call>" + '{"name": "x"}' + "</tool_call> after",
    "close_tag_in_text": "a </tool_call> b " + block("z"),
    "adjacent": block("a") + block("b") + block("c"),
    "empty": "",
}


@pytest.mark.parametrize("name", sorted(STREAM_CASES))
def test_stream_agrees_with_parse(name):
    text = STREAM_CASES[name]
    expected_content, expected_calls = parse_tool_calls(text)
    expected = [(i, c["function"]) for i, c in enumerate(expected_calls)]

    whole = summarize(run_stream([text]))
    by_char = summarize(run_stream(list(text)))
    rng = random.Random(1234)
    randomized = [summarize(run_stream(random_chunks(text, rng))) for _ in range(20)]

    for content, calls in [whole, by_char, *randomized]:
        assert calls == expected
        # Streaming does not strip; otherwise content is identical.
        assert content.strip() == expected_content
        assert content == whole[0]


def test_stream_content_is_input_minus_valid_blocks():
    valid = block("a", {"x": 1})
    text = "  lead <tool_call>bad</tool_call>\n" + valid + "\n trail  "
    content, _ = summarize(run_stream(list(text)))
    assert content == text.replace(valid, "")


def test_stream_tag_split_across_chunks():
    parser = StreamingToolCallParser()
    assert parser.feed("Sure. <tool") == [("content", "Sure. ")]
    assert parser.feed("_call>") == []
    assert parser.feed('\n{"name": "ls", "arguments": {}}\n</tool') == []
    events = parser.feed("_call>\nbye")
    assert [e[0] for e in events] == ["tool_call", "content"]
    assert events[0][1] == 0 and events[0][2]["function"] == {"name": "ls", "arguments": "{}"}
    assert events[1] == ("content", "\nbye")
    assert parser.finish() == []


def test_stream_releases_lt_once_it_cannot_be_a_tag():
    parser = StreamingToolCallParser()
    assert parser.feed("a <") == [("content", "a ")]
    assert parser.feed(" b") == [("content", "< b")]
    assert parser.feed("<tool_cal") == []
    assert parser.feed("l") == []
    assert parser.feed("!") == [("content", "<tool_call!")]
    assert parser.finish() == []


def test_stream_indices_in_order():
    events = run_stream(list(block("a") + "mid" + block("b") + block("c")))
    calls = [e for e in events if e[0] == "tool_call"]
    assert [(e[1], e[2]["function"]["name"]) for e in calls] == [(0, "a"), (1, "b"), (2, "c")]


def test_stream_invalid_block_emitted_raw():
    raw = "<tool_call>\n{broken\n</tool_call>"
    assert summarize(run_stream(list(raw))) == (raw, [])


def test_stream_finish_flushes_unterminated_block_and_resets():
    parser = StreamingToolCallParser()
    assert parser.feed('<tool_call>{"name": "x"') == []
    assert parser.finish() == [("content", '<tool_call>{"name": "x"')]
    assert parser.finish() == []
    events = parser.feed(block("y"))
    assert [(e[0], e[1]) for e in events] == [("tool_call", 0)]


def test_stream_long_block_fed_by_char():
    text = block("write", {"content": "x" * 20000})
    content, calls = summarize(run_stream(list(text)))
    assert content == ""
    assert json.loads(calls[0][1]["arguments"]) == {"content": "x" * 20000}


# --------------------------------------------------------------------------------------------------
# split_reasoning
# --------------------------------------------------------------------------------------------------


def test_split_reasoning_close_only():
    # Qwen3 templates put <think> in the prompt, so generations usually start inside the block.
    assert split_reasoning("Let me think.\n</think>\n\nThe answer is 4.") == ("Let me think.", "The answer is 4.")


def test_split_reasoning_open_and_close():
    assert split_reasoning("<think>\nhmm\n</think>\n\nHi  ") == ("hmm", "Hi  ")


def test_split_reasoning_empty_block():
    assert split_reasoning("<think>\n\n</think>\n\nHello") == ("", "Hello")


def test_split_reasoning_unterminated():
    assert split_reasoning("<think>\nstill thinking about") == ("still thinking about", "")
    assert split_reasoning("\n<think>") == ("", "")


def test_split_reasoning_no_tags():
    assert split_reasoning("  plain answer\n") == (None, "  plain answer\n")


def test_split_reasoning_mid_text_open_tag_is_not_reasoning():
    text = "Use the <think> tag to start reasoning."
    assert split_reasoning(text) == (None, text)


def test_split_reasoning_then_tool_calls():
    reasoning, content = split_reasoning("I need ls.</think>\n\n" + block("exec", {"command": "ls"}))
    assert reasoning == "I need ls."
    assert parse_tool_calls(content)[1][0]["function"]["name"] == "exec"


def test_split_reasoning_unicode():
    assert split_reasoning("<think>考虑 🤔</think>答案") == ("考虑 🤔", "答案")
