"""Qwen2.5's architecture end to end, offline (issue 38): the tiny random Qwen2 (`tiny-qwen2`: q/k/v biases, an untied
output layer, rope theta 1e6, as Qwen2.5-Coder-0.5B-Instruct) served by a real engine process and trained by the fsdp
actor. The engine's sampled log-probabilities equal the trainer's on the same tokens; full fine-tuning and LoRA both
change the policy; and weights the trainer publishes reach the engine (its log-probabilities afterwards are the
trained model's)."""

from __future__ import annotations

import random

import pytest
import torch

from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess
from slime.models import resolve_model_path


@pytest.fixture(scope="module")
def qwen2_path():
    return resolve_model_path("tiny-qwen2")


@pytest.fixture(scope="module")
def qwen2_engine(qwen2_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with EngineProcess(qwen2_path, log_path=log, ready_timeout=120) as server:
        with EngineClient(server.url, timeout=120.0) as client:
            yield client


def _actor(qwen2_path, *flags):
    from transformers import AutoTokenizer

    from slime.backends.fsdp.actor import FSDPActor
    from slime.backends.fsdp.parallel import init_distributed
    from slime.utils.arguments import parse_args

    dist = init_distributed("cpu")
    args = parse_args(["--hf-checkpoint", str(qwen2_path), "--rollout-batch-size", "4", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--lr", "1e-2", "--disable-rewards-normalization",
                       *flags], world_size=dist.world_size)
    return FSDPActor(args, dist, str(qwen2_path), AutoTokenizer.from_pretrained(str(qwen2_path)))


def _sampled_rows(engine: EngineClient, n: int = 4) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for _ in range(n):
        prompt = [rng.randrange(300, 4000) for _ in range(rng.randint(5, 12))]
        out = engine.generate(input_ids=prompt, sampling_params={"max_new_tokens": 12, "temperature": 1.0},
                              return_logprob=True)
        response = out["output_ids"]
        logprobs = [lp for lp, *_ in out["meta_info"]["output_token_logprobs"]]
        assert len(response) == len(logprobs) > 0
        rows.append({"tokens": prompt + list(response), "response_length": len(response),
                     "loss_mask": [1] * len(response), "advantages": [1.0] * len(response),
                     "rollout_log_probs": logprobs})
    return rows


def _max_gap(actor, rows) -> float:
    return max(abs(a - b) for row, lp in zip(rows, actor.compute_log_probs(rows))
               for a, b in zip(lp, row["rollout_log_probs"]))


def test_the_tiny_qwen2_has_qwen25s_architecture(qwen2_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(qwen2_path)
    assert config.model_type == "qwen2" and config.tie_word_embeddings is False
    model = AutoModelForCausalLM.from_pretrained(qwen2_path)
    attn = model.model.layers[0].self_attn
    assert all(p.bias is not None and p.bias.abs().sum() > 0 for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()


def test_engine_and_trainer_agree_and_a_published_step_reaches_the_engine(qwen2_engine, qwen2_path, tmp_path):
    rows = _sampled_rows(qwen2_engine)
    actor = _actor(qwen2_path)
    assert _max_gap(actor, rows) < 1e-4  # the same fp32 model: only the reduction order differs
    for row, lp in zip(rows, actor.compute_log_probs(rows)):
        row["old_log_probs"] = lp
    metrics = actor.train_step(rows, len(rows))
    assert 0 < metrics["train/grad_norm"] < float("inf")
    trained = actor.compute_log_probs(rows)
    assert max(abs(a - b) for t, r in zip(trained, rows) for a, b in zip(t, r["old_log_probs"])) > 1e-3
    published = actor.export_hf(tmp_path / "v1")
    qwen2_engine.update_weights_from_disk(str(published), weight_version=1)
    try:
        assert str(qwen2_engine.weight_version()) == "1"
        for row, lp in zip(rows, trained):
            prompt, response = row["tokens"][:-row["response_length"]], row["tokens"][-row["response_length"]:]
            scored = qwen2_engine.score(prompt, response)
            assert max(abs(a - b) for a, b in zip(scored.logprobs, lp)) < 1e-4
    finally:
        qwen2_engine.update_weights_from_disk(str(qwen2_path), weight_version=2)


def test_lora_trains_the_qwen2_adapters_and_leaves_the_base(qwen2_engine, qwen2_path):
    rows = _sampled_rows(qwen2_engine, 2)
    actor = _actor(qwen2_path, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8")
    for row, lp in zip(rows, actor.compute_log_probs(rows)):
        row["old_log_probs"] = lp
    base = {k: v.clone() for k, v in actor.hf_model.state_dict().items() if "lora_" not in k}
    actor.train_step(rows, len(rows))
    after = actor.hf_model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in base.items())  # the base (biases included) stays frozen
    trained = actor.compute_log_probs(rows)
    assert max(abs(a - b) for t, r in zip(trained, rows) for a, b in zip(t, r["old_log_probs"])) > 1e-4
