"""Qwen2.5's architecture end to end, offline (issue 38): the tiny random Qwen2 (`tiny-qwen2`: q/k/v biases, an untied
output layer, rope theta 1e6, as Qwen2.5-Coder-0.5B-Instruct) served by a real engine process and trained by the fsdp
actor. The engine's sampled log-probabilities equal the trainer's on the same tokens; full fine-tuning and LoRA both
change the policy; and weights the trainer publishes reach the engine (its log-probabilities afterwards are the
trained model's)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from slime.engine.client import EngineClient
from slime.engine.launch import EngineProcess
from slime.models import resolve_model_path

HELPERS = Path(__file__).resolve().parents[1] / "helpers"


@pytest.fixture(scope="module")
def qwen2_path():
    return resolve_model_path("tiny-qwen2")


@pytest.fixture(scope="module")
def qwen2_engine(qwen2_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with EngineProcess(qwen2_path, log_path=log, ready_timeout=120) as server:
        with EngineClient(server.url, timeout=120.0) as client:
            yield client


def _trainer(qwen2_path, rows, tmp_path, *flags, export: bool = False) -> dict:
    """The trainer's side in a process of its own (tests/helpers/trainer_check.py): a process group, its port and
    its environment must not outlive the check in this one."""
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    argv = [sys.executable, str(HELPERS / "trainer_check.py"), str(qwen2_path), str(tmp_path / "rows.json"),
            str(tmp_path / "out.json"), *([str(tmp_path / "v1")] if export else []), "--", *flags]
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**env, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / "out.json").read_text())


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


def _gap(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


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
    result = _trainer(qwen2_path, rows, tmp_path, export=True)
    assert _gap(result["before"], [r["rollout_log_probs"] for r in rows]) < 1e-4  # same fp32 model, other kernels
    assert 0 < result["grad_norm"] < float("inf") and _gap(result["after"], result["before"]) > 1e-3
    qwen2_engine.update_weights_from_disk(str(tmp_path / "v1"), weight_version=1)
    try:
        assert str(qwen2_engine.weight_version()) == "1"
        scored = [qwen2_engine.score(r["tokens"][:-r["response_length"]], r["tokens"][-r["response_length"]:]).logprobs
                  for r in rows]
        assert _gap(scored, result["after"]) < 1e-4  # the engine now serves the trained weights
    finally:
        qwen2_engine.update_weights_from_disk(str(qwen2_path), weight_version=2)


def test_lora_trains_the_qwen2_adapters_and_leaves_the_base(qwen2_engine, qwen2_path, tmp_path):
    from transformers import AutoConfig

    rows = _sampled_rows(qwen2_engine, 2)
    result = _trainer(qwen2_path, rows, tmp_path, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8")
    assert result["changed_base_tensors"] == []  # the base (biases included) stays frozen
    assert result["lora_layers"] == list(range(AutoConfig.from_pretrained(qwen2_path).num_hidden_layers))
    assert _gap(result["after"], result["before"]) > 1e-4


def test_lora_on_the_top_layers_adapts_only_those_and_still_trains(qwen2_engine, qwen2_path, tmp_path):
    from transformers import AutoConfig

    layers = AutoConfig.from_pretrained(qwen2_path).num_hidden_layers
    rows = _sampled_rows(qwen2_engine, 2)
    result = _trainer(qwen2_path, rows, tmp_path, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8",
                      "--lora-top-layers", "1")
    assert result["lora_layers"] == [layers - 1]
    assert result["changed_base_tensors"] == []
    assert _gap(result["after"], result["before"]) > 1e-4
