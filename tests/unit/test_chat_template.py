"""The ChatML-with-tools template of the tiny tokenizer (slime.models.chat_template) and its tag tokens."""

import json
import re

import pytest

from slime.models.chat_template import CHATML_TOOLS_TEMPLATE, template_renders_tools
from slime.models.tiny import SPECIAL_TOKENS, TAG_TOKENS


@pytest.fixture(scope="module")
def tok(tiny_model):
    return tiny_model[1]


def _render(tok, messages, tools=None, add_generation_prompt=False):
    return tok.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=add_generation_prompt
    )


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


def test_the_tiny_tokenizer_uses_the_tools_template(tok):
    assert tok.chat_template == CHATML_TOOLS_TEMPLATE


def test_plain_chatml_turns(tok):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"},
    ]
    expected = (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi!<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\nBye<|im_end|>\n"
    )
    assert _render(tok, messages) == expected
    assert _render(tok, messages, add_generation_prompt=True) == expected + "<|im_start|>assistant\n"


def test_without_system_message_there_is_no_system_turn(tok):
    out = _render(tok, [{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert out == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_developer_role_is_treated_as_system(tok):
    out = _render(tok, [{"role": "developer", "content": "Rules."}, {"role": "user", "content": "Hi"}])
    assert out == "<|im_start|>system\nRules.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"


def _tools_block(text: str) -> list[str]:
    match = re.search(r"<tools>\n(.*?)\n</tools>", text, re.S)
    assert match, text
    return match.group(1).split("\n")


def test_tools_are_listed_as_json_lines_in_the_system_turn(tok):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
    out = _render(tok, messages, tools=[WEATHER, TIME], add_generation_prompt=True)
    assert out.startswith("<|im_start|>system\nBe brief.\n\n# Tools\n")
    lines = _tools_block(out)
    assert [json.loads(line) for line in lines] == [WEATHER, TIME]
    # the system turn closes after the tool instructions, then the conversation follows as usual
    system_turn, rest = out.split("<|im_end|>\n", 1)
    assert "<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\n</tool_call>" in system_turn
    assert rest == "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    assert out.count("<|im_start|>system") == 1


def test_tools_without_system_message_still_get_a_system_turn(tok):
    out = _render(tok, [{"role": "user", "content": "Hi"}], tools=[TIME])
    assert out.startswith("<|im_start|>system\n# Tools\n")
    assert [json.loads(line) for line in _tools_block(out)] == [TIME]


def test_assistant_tool_calls_render_as_tagged_json(tok):
    args = {"city": "Paris", "days": 2, "units": {"temp": "C"}}
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}],
        },
    ]
    out = _render(tok, messages, tools=[WEATHER])
    turn = out.split("<|im_start|>assistant\n", 1)[1]
    assert turn.startswith("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ")
    assert turn.endswith("}\n</tool_call><|im_end|>\n")
    body = re.fullmatch(r"<tool_call>\n(.*)\n</tool_call><\|im_end\|>\n", turn, re.S).group(1)
    assert json.loads(body) == {"name": "get_weather", "arguments": args}


def test_several_tool_calls_and_string_arguments(tok):
    messages = [
        {"role": "user", "content": "?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                {"type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}},
            ],
        },
    ]
    turn = _render(tok, messages).split("<|im_start|>assistant\n", 1)[1]
    assert turn.startswith("Let me check.\n<tool_call>\n")
    bodies = re.findall(r"<tool_call>\n(.*?)\n</tool_call>", turn, re.S)
    assert [json.loads(b) for b in bodies] == [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_time", "arguments": {"tz": "CET"}},
    ]
    assert "</tool_call>\n<tool_call>" in turn  # calls separated by one newline


def test_consecutive_tool_messages_share_one_user_turn(tok):
    messages = [
        {"role": "user", "content": "Weather and time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}},
                {"type": "function", "function": {"name": "get_time", "arguments": {}}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "12:00"},
        {"role": "assistant", "content": "Sunny, noon."},
        {"role": "tool", "content": "late result"},
    ]
    out = _render(tok, messages, add_generation_prompt=True)
    assert (
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n12:00\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\nSunny, noon.<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\nlate result\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    ) in out
    assert out.count("<|im_start|>user") == 3
    assert out.count("<tool_response>") == 3


def test_template_renders_tools():
    assert template_renders_tools(CHATML_TOOLS_TEMPLATE)
    assert not template_renders_tools(None)
    assert not template_renders_tools("")
    plain = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    assert not template_renders_tools(plain)
    assert template_renders_tools("{% if tools %}{{ tools | tojson }}{% endif %}")


def test_tools_change_the_prompt(tok):
    messages = [{"role": "user", "content": "Hi"}]
    assert _render(tok, messages, tools=[WEATHER]) != _render(tok, messages)
    assert _render(tok, messages, tools=[]) == _render(tok, messages)


# --------------------------------------------------------------------------------------------------
# tag tokens
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", TAG_TOKENS)
def test_tag_tokens_are_single_tokens_kept_by_skip_special_tokens(tok, tag):
    ids = tok.encode(tag)
    assert len(ids) == 1 and ids[0] == tok.convert_tokens_to_ids(tag)
    assert ids[0] not in tok.all_special_ids
    assert tok.decode(ids, skip_special_tokens=True) == tag
    text = f"a{tag}b"
    assert tok.decode(tok.encode(text), skip_special_tokens=True) == text


@pytest.mark.parametrize("special", SPECIAL_TOKENS)
def test_chatml_markers_are_single_special_tokens_removed_by_skip(tok, special):
    ids = tok.encode(f"x{special}y")
    assert tok.convert_tokens_to_ids(special) in ids
    assert tok.decode(ids, skip_special_tokens=True) == "xy"
    assert tok.decode(ids, skip_special_tokens=False) == f"x{special}y"


def test_eos_is_im_end(tok):
    assert tok.eos_token == "<|im_end|>"
    assert tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")


def test_rendered_tool_call_decodes_back_without_markers(tok):
    messages = [
        {"role": "user", "content": "?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
    ]
    ids = tok.apply_chat_template(messages, tokenize=True, return_dict=False)
    if isinstance(ids, dict):
        ids = ids["input_ids"]
    for marker in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"):
        assert tok.convert_tokens_to_ids(marker) in ids
    text = tok.decode(ids, skip_special_tokens=True)
    assert "<|im_start|>" not in text and "<|im_end|>" not in text
    assert text.endswith('assistant\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n')
