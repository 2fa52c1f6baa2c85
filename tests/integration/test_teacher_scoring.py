"""OPD teacher scoring through a real engine (slime.conversation.teacher).

- Teacher log-probs of a hinted prompt equal a direct forward pass of the same model on
  teacher_prompt_ids + response_ids at every response position, the first response token included, at
  temperature 1 and at the trainer's 0.6 (teacher and student are scored at the same temperature); top-K
  rows come from the same single call as the log-probs and match the forward pass's top-K.
- The teacher renderer reproduces the engine's own prompt_token_ids (system prompt, tools, a tool
  round, OpenClaw's internal-context message), for the tiny model's template and for SmolLM2, whose
  template ignores tools so the engine falls back to our ChatML tool template.
- With an instruction-following model (SmolLM2-135M-Instruct), a hint raises the teacher's log-prob
  of hint-consistent tokens ("Bonjour" under "Answer in French.").
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
import torch

from slime.conversation.teacher import (
    HINT_MARKER,
    TeacherPromptBuilder,
    engine_applies_score_temperature,
    hinted_messages,
    score_prompt,
    score_with_hint,
)
from slime.engine.client import AsyncEngineClient, EngineClient

ATOL = 1e-4
TOP_K = 5

TOOLS = [{"type": "function", "function": {
    "name": "exec", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
INTERNAL = {"role": "user", "content": [{"type": "text", "text": (
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
    "\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")}]}


def tool_round_messages() -> list[dict]:
    """An OpenClaw-shaped agent turn: system prompt, user request, a tool call and its result, internal context."""
    return [
        {"role": "developer", "content": "You are a terse assistant. Use tools when needed."},
        {"role": "user", "content": "[Sat 2026-11-21 23:38 UTC] Which directory am I in?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call0", "type": "function",
            "function": {"name": "exec", "arguments": json.dumps({"command": "pwd"})}}]},
        {"role": "tool", "tool_call_id": "call0", "content": "/home/user/workspace"},
        INTERNAL,
    ]


def chat(url: str, messages: list[dict], tools=None, **params) -> dict:
    body = {"messages": messages, "return_token_ids": True, "logprobs": True, **params}
    if tools:
        body["tools"] = tools
    with EngineClient(url, timeout=120.0) as client:
        return client.chat(body)


def forward_logprobs(model, ids: list[int], temperature: float) -> torch.Tensor:
    """[len(ids), V]: row p is log_softmax(logits_p / T), the distribution of token p + 1."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits / temperature, dim=-1)


async def _score(url, tokenizer, messages, tools, response_ids, hint, temperature, top_k=0):
    async with AsyncEngineClient(url, timeout=120.0) as client:
        return await score_with_hint(client, tokenizer, messages, tools, response_ids, hint, temperature, top_k)


@pytest.fixture(scope="module")
def student_turn(engine_server):
    """A turn the tiny policy actually served: its messages, tools and the engine's prompt/response ids."""
    messages = tool_round_messages()
    out = chat(engine_server.url, messages, TOOLS, max_tokens=12, temperature=1.0, seed=3)
    response_ids = out["choices"][0]["token_ids"]
    assert len(response_ids) >= 3, "want a response of several tokens"
    return {"messages": messages, "tools": TOOLS, "prompt_ids": out["prompt_token_ids"],
            "response_ids": response_ids}


# --------------------------------------------------------------------------------------------------
# exactness against a direct forward pass
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_teacher_logprobs_equal_direct_forward_at_every_response_position(engine_server, tiny_model, student_turn,
                                                                          temperature):
    model, tokenizer = tiny_model
    hint = "Answer with the directory path only."
    response = student_turn["response_ids"]
    scores = asyncio.run(_score(engine_server.url, tokenizer, student_turn["messages"], TOOLS, response, hint,
                                temperature, top_k=TOP_K))

    teacher_prompt = TeacherPromptBuilder(tokenizer).render_prompt_ids(
        hinted_messages(student_turn["messages"], hint), TOOLS)
    assert scores.prompt_len == len(teacher_prompt)
    assert len(teacher_prompt) > len(student_turn["prompt_ids"])  # the hint is in there
    assert HINT_MARKER + hint in tokenizer.decode(teacher_prompt)

    ref = forward_logprobs(model, teacher_prompt + response, temperature)
    L = len(teacher_prompt)
    assert len(scores.log_probs) == len(response)
    for i, token in enumerate(response):  # i = 0 is the first response token, given the whole hinted prompt
        expected = ref[L + i - 1, token].item()
        assert abs(scores.log_probs[i] - expected) <= ATOL, f"position {i}: {scores.log_probs[i]} vs {expected}"

    assert len(scores.topk_log_probs) == len(scores.topk_indices) == len(response)
    for i in range(len(response)):
        row = ref[L + i - 1]
        values, indices = torch.topk(row, TOP_K)
        assert scores.topk_log_probs[i] == pytest.approx(values.tolist(), abs=ATOL), f"top-K values at {i}"
        for got, want in zip(scores.topk_indices[i], indices.tolist()):
            # ids agree unless two candidates are numerically tied
            assert got == want or abs(row[got].item() - row[want].item()) <= ATOL, f"top-K index at {i}"
        # each value belongs to its id
        assert [row[t].item() for t in scores.topk_indices[i]] == pytest.approx(scores.topk_log_probs[i], abs=ATOL)


def test_temperature_reaches_the_teacher_scores(engine_server, student_turn):
    """The engine applies the request temperature to input log-probs: T=0.6 differs from T=1."""
    async def probe():
        async with AsyncEngineClient(engine_server.url, timeout=120.0) as client:
            return await engine_applies_score_temperature(client, student_turn["prompt_ids"],
                                                          student_turn["response_ids"], 0.6)

    assert asyncio.run(probe())


# --------------------------------------------------------------------------------------------------
# the renderer reproduces the engine's prompt ids
# --------------------------------------------------------------------------------------------------


def _check_renderer(url: str, tokenizer):
    builder = TeacherPromptBuilder(tokenizer)
    cases = [
        (tool_round_messages(), TOOLS, {}),
        ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
          {"role": "assistant", "content": "hello"}, {"role": "user", "content": "again"}], None, {}),
        (tool_round_messages(), TOOLS, {"tool_choice": "none"}),
    ]
    for messages, tools, extra in cases:
        out = chat(url, messages, tools, max_tokens=1, temperature=0.0, **extra)
        request = {"messages": messages, "tools": tools, **extra}
        assert builder.render_request_prompt_ids(request) == out["prompt_token_ids"], (messages, extra)
        assert builder.matches_turn(SimpleNamespace(request=request, prompt_ids=out["prompt_token_ids"]))


def test_renderer_reproduces_the_engines_prompt_ids(engine_server, tiny_model, student_turn):
    assert TeacherPromptBuilder(tiny_model[1]).render_prompt_ids(student_turn["messages"], TOOLS) \
        == student_turn["prompt_ids"]
    _check_renderer(engine_server.url, tiny_model[1])


# --------------------------------------------------------------------------------------------------
# SmolLM2: the fallback tool template, and a hint that matters
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smollm2_engine(tmp_path_factory):
    from slime.engine.launch import EngineProcess
    from slime.models import resolve_model_path

    try:
        path = resolve_model_path("smollm2")
    except Exception as exc:  # pragma: no cover - the model ships with the environment
        pytest.skip(f"SmolLM2 not available: {exc}")
    log = tmp_path_factory.mktemp("smollm2") / "engine.log"
    with EngineProcess(path, log_path=log, ready_timeout=180) as server:
        yield server, path


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_engine):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_engine[1])


def test_renderer_reproduces_smollm2_prompt_ids_with_the_fallback_tool_template(smollm2_engine, smollm2_tokenizer):
    from slime.models.chat_template import template_renders_tools

    assert not template_renders_tools(smollm2_tokenizer.chat_template)  # the engine's fallback path
    _check_renderer(smollm2_engine[0].url, smollm2_tokenizer)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_a_hint_raises_the_teachers_logprob_of_hint_consistent_tokens(smollm2_engine, smollm2_tokenizer,
                                                                      temperature):
    server, _ = smollm2_engine
    tok = smollm2_tokenizer
    messages = [{"role": "user", "content": "Say hello to me."}]
    french = tok.encode("Bonjour!", add_special_tokens=False)
    english = tok.encode("Hello!", add_special_tokens=False)
    builder = TeacherPromptBuilder(tok)

    async def run():
        async with AsyncEngineClient(server.url, timeout=120.0) as client:
            plain_ids = builder.render_prompt_ids(messages)
            plain = {name: (await client.score(plain_ids, ids, temperature=temperature)).logprobs
                     for name, ids in (("fr", french), ("en", english))}
            hinted = {name: (await score_with_hint(client, tok, messages, None, ids, "Answer in French.",
                                                   temperature)).log_probs
                      for name, ids in (("fr", french), ("en", english))}
            return plain, hinted

    plain, hinted = asyncio.run(run())
    # the first response token carries the decision, so its teacher log-prob must be a real one
    assert hinted["fr"][0] > plain["fr"][0] + 1.0, (plain, hinted)
    assert sum(hinted["fr"]) > sum(plain["fr"]) + 1.0, (plain, hinted)
    # ... and the hint moves mass from the English greeting to the French one
    assert hinted["fr"][0] - plain["fr"][0] > hinted["en"][0] - plain["en"][0] + 1.0, (plain, hinted)


def test_score_prompt_scores_exactly_the_given_ids(engine_server, tiny_model, student_turn):
    """The teacher input is prompt ids + response ids as given, never re-tokenized text: the engine echoes
    the same ids."""
    _, tokenizer = tiny_model
    prompt = TeacherPromptBuilder(tokenizer).build(student_turn["messages"], TOOLS, student_turn["response_ids"],
                                                   "be brief")

    async def run():
        async with AsyncEngineClient(engine_server.url, timeout=120.0) as client:
            return await score_prompt(client, prompt, 1.0)

    scores = asyncio.run(run())  # parse_score raises if the engine's token ids differ from response_ids
    assert len(scores.log_probs) == len(student_turn["response_ids"])
    assert all(lp <= 0.0 for lp in scores.log_probs)
