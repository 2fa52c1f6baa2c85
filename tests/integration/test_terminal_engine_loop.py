"""The terminal `generate` hook with a real engine (the tiny model) and a real pool server (the terminal provider):
the turn sample holds the prompt exactly as rendered and the engine's own ids and log-probs; a step judge scores the
turn (rules on CPU; `llm` with the tiny model as the PRM, whose votes are noise but are cast m times per turn)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from slime.agentic import prm
from slime.agentic import sandbox as sb
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from generate import SYSTEM_PROMPT, generate, reward_func
from terminal_prm import TerminalLLMJudge
from slime.utils.types import Sample

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

TASK = {"task_name": "count-error-lines", "task_path": "count-error-lines", "instruction": "(the task's own)"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with PoolServerProcess(PoolSettings(provider="terminal", state_dir=str(tmp_path_factory.mktemp("pool")))) as s:
        yield s


def _args(engine_url, model, pool_url, **kw):
    return SimpleNamespace(hf_checkpoint=str(model), engine_urls=[engine_url], rollout_max_context_len=2048,
                           max_turns=3, env_server_url=pool_url, **kw)


def run(coro):
    prm._JUDGES.clear()
    return asyncio.run(coro)


def test_a_turn_sample_is_the_rendered_prompt_and_the_engines_ids(engine_server, tiny_model_path, pool):
    from transformers import AutoTokenizer

    from slime.agentic.shell_sessions import tool_schemas
    from slime.models.chat_template import render_prompt_ids

    args = _args(engine_server.url, tiny_model_path, pool.url, step_judge="rules")
    params = {"temperature": 1.0, "max_new_tokens": 8, "seed": 3}
    [turn] = run(generate(args, Sample(group_index=1, index=2, prompt=dict(TASK)), params))
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    assert turn.response_length == len(turn.rollout_log_probs) == len(turn.loss_mask) == 8
    prompt_ids = turn.tokens[:-turn.response_length]
    text = tok.decode(prompt_ids)
    assert text.count(SYSTEM_PROMPT) == 1 and "Task name:count-error-lines\nTask instruction: " in text
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]}]
    assert prompt_ids == render_prompt_ids(tok, messages, tool_schemas())  # exactly what was rendered and sent
    assert all(lp <= 0 for lp in turn.rollout_log_probs)
    meta = turn.metadata
    assert (meta["status"], meta["stop_reason"], meta["num_turns"]) == ("completed", "final_answer", 1)
    assert meta["evaluation"]["passed"] == 0 and meta["step_wise"]["prm_scores"] == [None]  # an answer: unjudged
    [reward] = run(reward_func(args, [turn]))
    assert reward["score"] == -1.0 and meta["step_wise"]["step_scores_with_outcome"] == [-1.0]


def test_the_llm_step_judge_votes_m_times_per_turn(engine_server, tiny_model_path, pool):
    args = _args(engine_server.url, tiny_model_path, pool.url, prm_enable=True, prm_engine_url=engine_server.url,
                 prm_m=2, prm_temperature=1.0, prm_max_new_tokens=8, prm_step_coef=1.0)
    params = {"temperature": 1.0, "max_new_tokens": 8, "seed": 5}

    async def go():
        out = await generate(args, Sample(group_index=0, index=0, prompt=dict(TASK)), params)
        [judge] = prm._JUDGES.values()
        return out, judge

    out, judge = run(go())
    assert isinstance(judge, TerminalLLMJudge)
    assert judge.stats["steps"] == len(out) and judge.stats["votes"] + judge.stats["failed_calls"] == 2 * len(out)
    scores = [s.metadata["step_wise"]["prm_scores"][0] for s in out]
    assert all(s is None or -1 <= s <= 1 for s in scores)
