"""The SWE `generate` hook with a real engine (the tiny random model) and a real pool server (the `swe` provider):
step samples hold the context exactly as rendered and extended, and the engine's own ids and log-probs; the
trajectory sample holds the same ids with observations masked; the rule PRM scores every step by its index. The
random model writes no bash block, so every step is a format error and every episode is -1: this pins plumbing."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from slime.agentic import prm
import swe_templates as templates
from generate_with_swe_remote import generate, reward_func
from slime.agentic.swe.instances import as_training_row
from slime.utils.types import Sample

from swe_pool import instance, pool, requires_bwrap  # noqa: F401 (fixtures)

pytestmark = requires_bwrap


def _sample(instance, index=0):
    row = as_training_row(instance)
    return Sample(group_index=0, index=index, prompt=row["text"], metadata=row["metadata"])


def _args(engine_url, model, pool_url, **kw):
    return SimpleNamespace(**{"hf_checkpoint": str(model), "engine_urls": [engine_url],
                              "rollout_max_context_len": 2048, "max_turns": 3, "env_server_url": pool_url, **kw})


def run(coro):
    prm._JUDGES.clear()
    return asyncio.run(coro)


def test_step_samples_are_the_rendered_context_and_the_engines_ids(engine_server, tiny_model_path, pool, instance):
    from transformers import AutoTokenizer

    from slime.models.chat_template import render_prompt_ids

    args = _args(engine_server.url, tiny_model_path, pool.url, dynamic_history=True, step_judge="rules")
    params = {"temperature": 1.0, "max_new_tokens": 12, "seed": 3}
    steps = run(generate(args, _sample(instance), params))
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    assert len(steps) == 3 and [s.metadata["step"] for s in steps] == [0, 1, 2]
    first = render_prompt_ids(tok, [templates.system_message(), templates.instance_message(instance.problem_statement)])
    assert steps[0].tokens[:-steps[0].response_length] == first  # [system, problem] exactly as rendered
    for before, after in zip(steps, steps[1:]):  # the next context extends this one by its ids + the observation
        assert after.tokens[:len(before.tokens)] == before.tokens
        between = tok.decode(after.tokens[len(before.tokens):len(after.tokens) - after.response_length])
        assert templates.FORMAT_ERROR in between and between.endswith("<|im_start|>assistant\n")
    for s in steps:
        assert s.response_length == len(s.rollout_log_probs) == len(s.loss_mask) == 12 and set(s.loss_mask) == {1}
        assert all(lp <= 0 for lp in s.rollout_log_probs)
        meta = s.metadata
        assert (meta["exit_status"], meta["patch_source"], meta["resolved"]) == ("max_steps", "none", False)
        assert meta["step_wise"]["prm_scores"] == [-1.0]  # a format error, judged at its own index
    rewards = run(reward_func(args, steps))
    assert [r["score"] for r in rewards] == [-1.0] * 3
    assert [s.metadata["step_wise"]["step_scores_with_outcome"] for s in steps] == [[-2.0]] * 3


def test_the_trajectory_sample_holds_the_same_ids_with_observations_masked(engine_server, tiny_model_path, pool,
                                                                           instance):
    from transformers import AutoTokenizer

    args = _args(engine_server.url, tiny_model_path, pool.url, max_turns=2)
    params = {"temperature": 1.0, "max_new_tokens": 10, "seed": 4}
    [s] = run(generate(args, _sample(instance, 1), params))
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    spans = s.metadata["step_wise"]["step_token_spans"]
    assert len(spans) == 2 and spans[0] == [0, 10] and spans[1][1] == s.response_length
    response = s.tokens[len(s.tokens) - s.response_length:]
    observation = tok.decode(response[spans[0][1]:spans[1][0]])
    assert templates.FORMAT_ERROR in observation
    assert s.loss_mask == [1] * 10 + [0] * (spans[1][0] - 10) + [1] * 10
    assert all(lp == 0.0 for lp in s.rollout_log_probs[10:spans[1][0]])
    assert all(lp < 0 for lp in s.rollout_log_probs[:10] + s.rollout_log_probs[spans[1][0]:])
    assert s.status == Sample.Status.TRUNCATED and s.metadata["exit_status"] == "max_steps"
