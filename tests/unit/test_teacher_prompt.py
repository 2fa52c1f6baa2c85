"""Teacher prompts for OPD (slime.conversation.teacher): hint placement, rendering, one-call scoring."""

from __future__ import annotations

import asyncio
import json

import pytest

from slime.conversation.teacher import (
    HINT_MARKER,
    TeacherPromptBuilder,
    TeacherPromptError,
    TeacherScores,
    engine_applies_score_temperature,
    hint_target_index,
    hinted_messages,
    request_tools,
    score_prompt,
    score_with_hint,
)
from slime.engine.client import ScoreResult

INTERNAL_TEXT = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
                 "\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")
INTERNAL = {"role": "user", "content": [{"type": "text", "text": INTERNAL_TEXT}]}
TOOLS = [{"type": "function", "function": {
    "name": "exec", "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]


def test_marker_text_is_upstreams():
    assert HINT_MARKER == "\n\n[user's hint / instruction]\n"


def test_hint_goes_to_the_last_user_message_and_is_stripped():
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "  second question  \n"},
    ]
    out = hinted_messages(messages, "  answer in French \n")
    # upstream's rule: flatten, append marker + stripped hint, strip the whole (inner whitespace stays)
    assert out[3]["content"] == "second question  \n" + HINT_MARKER + "answer in French"
    assert out[:3] == messages[:3]
    # the input is untouched (deep copy)
    assert messages[3]["content"] == "  second question  \n"
    out[0]["content"] = "changed"
    assert messages[0]["content"] == "Be brief."


def test_internal_context_message_is_kept_in_place_and_untouched():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "[Sat 2026-11-21 23:38 UTC] run pwd please"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "exec", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "/home/user"},
        INTERNAL,
    ]
    assert hint_target_index(messages) == 1  # several tool steps before the scored response
    out = hinted_messages(messages, "use ls -la")
    assert out[1]["content"] == "[Sat 2026-11-21 23:38 UTC] run pwd please" + HINT_MARKER + "use ls -la"
    assert out[4] == INTERNAL and out[4] is not INTERNAL
    assert out[2:4] == messages[2:4]
    assert len(out) == len(messages)


def test_internal_context_with_string_content_is_also_recognised():
    messages = [{"role": "user", "content": "real"}, {"role": "user", "content": "  " + INTERNAL_TEXT}]
    assert hint_target_index(messages) == 0


def test_list_content_is_flattened_like_the_engine_does():
    messages = [{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}]
    out = hinted_messages(messages, "hint")
    assert out[0]["content"] == "part one\npart two" + HINT_MARKER + "hint"


def test_developer_role_is_left_for_rendering_and_rendered_as_system(tiny_model):
    messages = [{"role": "developer", "content": "dev rules"}, {"role": "user", "content": "hi"}]
    out = hinted_messages(messages, "be kind")
    assert out[0] == {"role": "developer", "content": "dev rules"}
    assert out[1]["content"] == "hi" + HINT_MARKER + "be kind"
    builder = TeacherPromptBuilder(tiny_model[1])
    as_system = [{"role": "system", "content": "dev rules"}, out[1]]
    assert builder.render_prompt_ids(out) == builder.render_prompt_ids(as_system)


def test_no_user_message_falls_back_to_the_last_message():
    messages = [{"role": "system", "content": "sys"}, {"role": "assistant", "content": "hello"}]
    out = hinted_messages(messages, "hint")
    assert out[1]["content"] == "hello" + HINT_MARKER + "hint"
    # only internal-context user messages: the last non-internal message
    messages = [{"role": "system", "content": "sys"}, INTERNAL]
    out = hinted_messages(messages, "hint")
    assert out[0]["content"] == "sys" + HINT_MARKER + "hint" and out[1] == INTERNAL


def test_empty_messages_become_one_user_message():
    assert hinted_messages([], "  do X ") == [{"role": "user", "content": "[user's hint / instruction]\ndo X"}]


def test_blank_hint_is_refused():
    with pytest.raises(TeacherPromptError):
        hinted_messages([{"role": "user", "content": "q"}], "   ")


def test_openclaw_capture_hint_lands_in_the_users_request(openclaw_captures):
    body = openclaw_captures["03_local_tool_result_followup"]["body"]
    messages = body["messages"]
    out = hinted_messages(messages, "print the path only")
    changed = [i for i, (a, b) in enumerate(zip(messages, out)) if a != b]
    assert changed == [len(messages) - 4]
    assert messages[-4]["role"] == "user" and out[-4]["content"].endswith(HINT_MARKER + "print the path only")
    assert out[-1] == messages[-1]


def test_request_tools_respects_tool_choice_none():
    assert request_tools({"tools": TOOLS}) == TOOLS
    assert request_tools({"tools": TOOLS, "tool_choice": "auto"}) == TOOLS
    assert request_tools({"tools": TOOLS, "tool_choice": "none"}) is None
    assert request_tools({"tools": []}) is None


# --------------------------------------------------------------------------------------------------
# rendering (tiny tokenizer)
# --------------------------------------------------------------------------------------------------


def test_render_matches_the_template_with_tools_and_generation_prompt(tiny_model):
    tok = tiny_model[1]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}]
    text = tok.apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n") and '"name": "exec"' in text
    ids = TeacherPromptBuilder(tok).render_prompt_ids(messages, TOOLS)
    assert ids == tok.encode(text, add_special_tokens=False)


def test_teacher_input_is_hinted_prompt_ids_then_the_exact_response_ids(tiny_model):
    tok = tiny_model[1]
    builder = TeacherPromptBuilder(tok)
    messages = [{"role": "user", "content": "hello"}]
    # a response whose ids are NOT what tokenizing its text would give: re-tokenizing would change them
    text_ids = tok.encode("hello world", add_special_tokens=False)
    split = [t for ch in "hello world" for t in tok.encode(ch, add_special_tokens=False)]
    assert split != text_ids
    prompt = builder.build(messages, None, split, "answer briefly")
    hinted_text = tok.apply_chat_template(
        [{"role": "user", "content": "hello" + HINT_MARKER + "answer briefly"}], add_generation_prompt=True,
        tokenize=False)
    assert prompt.prompt_ids == tok.encode(hinted_text, add_special_tokens=False)
    assert prompt.input_ids == prompt.prompt_ids + split
    assert prompt.prompt_len == len(prompt.prompt_ids)
    assert prompt.response_ids == split


def test_matches_turn_checks_the_stored_prompt(tiny_model):
    from types import SimpleNamespace

    builder = TeacherPromptBuilder(tiny_model[1])
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS, "tool_choice": "auto"}
    good = builder.render_prompt_ids(request["messages"], TOOLS)
    assert builder.matches_turn(SimpleNamespace(request=request, prompt_ids=good))
    assert not builder.matches_turn(SimpleNamespace(request=request, prompt_ids=good[:-1]))
    # tool_choice none: the engine rendered no tools
    no_tools = {**request, "tool_choice": "none"}
    assert not builder.matches_turn(SimpleNamespace(request=no_tools, prompt_ids=good))
    assert builder.matches_turn(SimpleNamespace(request=no_tools,
                                                prompt_ids=builder.render_prompt_ids(request["messages"])))


def test_unrenderable_messages_raise_teacher_prompt_error(tiny_model):
    builder = TeacherPromptBuilder(tiny_model[1])
    with pytest.raises(TeacherPromptError):
        builder.render_prompt_ids([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


# --------------------------------------------------------------------------------------------------
# scoring against a fake client
# --------------------------------------------------------------------------------------------------


class FakeClient:
    def __init__(self, scale_temperature=True):
        self.calls = []
        self.scale_temperature = scale_temperature

    async def score(self, prompt_ids, response_ids, temperature=1.0, top_logprobs_num=0):
        self.calls.append((list(prompt_ids), list(response_ids), temperature, top_logprobs_num))
        t = temperature if self.scale_temperature else 1.0
        lps = [-(i + 1) / t for i in range(len(response_ids))]
        top = None
        if top_logprobs_num:
            top = [[(-0.1 * (j + 1), 100 + j) for j in range(top_logprobs_num)] for _ in response_ids]
        return ScoreResult(logprobs=lps, top_logprobs=top, weight_version="7")


def test_score_with_hint_makes_one_call_with_topk_at_the_given_temperature(tiny_model):
    client = FakeClient()
    messages = [{"role": "user", "content": "hello"}]
    scores = asyncio.run(score_with_hint(client, tiny_model[1], messages, None, [5, 6, 7], "be brief",
                                         temperature=0.6, top_k=3))
    assert len(client.calls) == 1
    prompt_ids, response_ids, temperature, k = client.calls[0]
    assert response_ids == [5, 6, 7] and temperature == 0.6 and k == 3
    assert prompt_ids == TeacherPromptBuilder(tiny_model[1]).render_prompt_ids(
        [{"role": "user", "content": "hello" + HINT_MARKER + "be brief"}])
    assert isinstance(scores, TeacherScores)
    assert scores.log_probs == pytest.approx([-1 / 0.6, -2 / 0.6, -3 / 0.6])
    assert scores.topk_log_probs == [[-0.1, -0.2, -0.30000000000000004]] * 3
    assert scores.topk_indices == [[100, 101, 102]] * 3
    assert scores.prompt_len == len(prompt_ids)
    assert scores.weight_version == "7"


def test_score_without_topk_has_no_topk_rows(tiny_model):
    client = FakeClient()
    scores = asyncio.run(score_with_hint(client, tiny_model[1], [{"role": "user", "content": "q"}], None, [5],
                                         "h", temperature=1.0))
    assert scores.topk_log_probs is None and scores.topk_indices is None and len(scores.log_probs) == 1


def test_greedy_or_negative_temperature_is_refused(tiny_model):
    builder = TeacherPromptBuilder(tiny_model[1])
    prompt = builder.build([{"role": "user", "content": "q"}], None, [5], "h")
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError):
            asyncio.run(score_prompt(FakeClient(), prompt, bad))


def test_short_topk_rows_are_an_error(tiny_model):
    class Short(FakeClient):
        async def score(self, prompt_ids, response_ids, temperature=1.0, top_logprobs_num=0):
            result = await super().score(prompt_ids, response_ids, temperature, top_logprobs_num)
            result.top_logprobs[0] = result.top_logprobs[0][:1]
            return result

    prompt = TeacherPromptBuilder(tiny_model[1]).build([{"role": "user", "content": "q"}], None, [5, 6], "h")
    with pytest.raises(ValueError, match="row 0"):
        asyncio.run(score_prompt(Short(), prompt, 1.0, top_k=2))


def test_temperature_probe_tells_scaling_and_ignoring_engines_apart():
    assert asyncio.run(engine_applies_score_temperature(FakeClient(True), [1, 2], [3, 4], 0.6))
    assert not asyncio.run(engine_applies_score_temperature(FakeClient(False), [1, 2], [3, 4], 0.6))


def test_tool_round_request_renders(tiny_model):
    builder = TeacherPromptBuilder(tiny_model[1])
    messages = [
        {"role": "user", "content": "run pwd"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": json.dumps({"command": "pwd"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "/home"},
        INTERNAL,
    ]
    prompt = builder.build(messages, TOOLS, [5], "print only the path")
    text = tiny_model[1].decode(prompt.prompt_ids)
    assert text.index("run pwd" + HINT_MARKER + "print only the path") < text.index("<tool_response>")
    assert text.rstrip().endswith("<|im_start|>assistant")
