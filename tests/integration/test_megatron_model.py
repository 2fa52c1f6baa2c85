"""The megatron-core GPTModel built from an HF config computes the HF model's logits (TP=1 in-process, TP=2 over
two gloo processes), exports the same weights back, and the megatron actor's log-probs, loss and gradients equal
the fsdp actor's. Runs on CPU through the test-only shim tests/helpers/megatron_cpu.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("megatron.core")

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "tests" / "helpers" / "megatron_worker.py"


@pytest.fixture(scope="module")
def tiny_llama_path(tmp_path_factory):
    """A tiny random Llama with untied embeddings and a vocabulary that needs padding (no tokenizer needed)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=301, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=False,
                         rope_theta=50000.0, rms_norm_eps=1e-5)
    torch.manual_seed(1)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for param in model.parameters():  # random norms too, so a swapped norm shows
            param.normal_(0, 0.5)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    return path


def _torchrun(procs: int, *argv: str) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={procs}", str(WORKER),
           *argv]
    done = subprocess.run(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture()
def megatron_single_process():
    from helpers.megatron_cpu import single_process_model_parallel

    with single_process_model_parallel():
        yield


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_logits_equal_hf_at_tp1(megatron_single_process, family, tiny_model_path, tiny_llama_path):
    from transformers import AutoModelForCausalLM

    from slime.backends.megatron import model as mmodel

    path = tiny_model_path if family == "qwen3" else tiny_llama_path
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    assert hf.config.model_type == family
    gpt = mmodel.build_gpt_model(hf.config, mmodel.ParallelSizes(), cpu_init=True)
    mmodel.load_hf_state_dict(gpt, hf.state_dict(), hf.config)
    gpt.eval()
    ids = torch.randint(0, hf.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = gpt(ids, torch.arange(16).expand_as(ids), None)
        reference = hf(ids).logits
    assert logits.shape[-1] == mmodel.convert.padded_vocab_size(hf.config.vocab_size, 1)
    assert reference.abs().max() > 1  # not a degenerate all-zero comparison
    torch.testing.assert_close(logits[..., : hf.config.vocab_size], reference, rtol=1e-4, atol=1e-4)
    exported = mmodel.gather_hf_state_dict(gpt, hf.config)
    original = hf.state_dict()
    assert all(torch.equal(tensor, original[name]) for name, tensor in exported.items())


@pytest.mark.parametrize("family", ["qwen3", "llama"])
def test_logits_equal_hf_at_tp2(tmp_path, family, tiny_model_path, tiny_llama_path):
    path = tiny_model_path if family == "qwen3" else tiny_llama_path
    out = tmp_path / "logits.pt"
    _torchrun(2, "logits", str(path), str(out))
    result = torch.load(out)
    vocab = result["reference"].shape[-1]
    assert result["local_vocab"] == mmodel_padded(vocab, 2) // 2  # each rank held half of the (padded) vocab
    torch.testing.assert_close(result["logits"], result["reference"], rtol=1e-4, atol=1e-4)
    assert result["export_equal"] and all(result["export_equal"].values())


def mmodel_padded(vocab: int, tp: int) -> int:
    from slime.backends.megatron.convert import padded_vocab_size

    return padded_vocab_size(vocab, tp)


@pytest.mark.slow
def test_megatron_actor_matches_fsdp_actor(tmp_path, tiny_model_path):
    """Same rows, same loss function: log-probs, loss metrics and gradients (HF layout) agree at TP=1 and TP=2."""
    _torchrun(1, "step", "fsdp", str(tmp_path / "fsdp.pt"))
    fsdp = torch.load(tmp_path / "fsdp.pt", weights_only=False)
    assert fsdp["metrics"]["train/pg_clipfrac"] > 0  # clipping is exercised
    for tp in (1, 2):
        _torchrun(tp, "step", "megatron", str(tmp_path / f"megatron{tp}.pt"))
        meg = torch.load(tmp_path / f"megatron{tp}.pt", weights_only=False)
        assert f"tp={tp}" in meg["description"]
        for mine, theirs in zip(meg["log_probs"], fsdp["log_probs"], strict=True):
            assert mine == pytest.approx(theirs, abs=1e-5)
        for key in ("train/pg_loss", "train/pg_clipfrac", "train/ppo_kl", "train/entropy_loss", "train/tokens"):
            assert meg["metrics"][key] == pytest.approx(fsdp["metrics"][key], abs=1e-5), key
        assert meg["grads"].keys() == fsdp["grads"].keys()
        for name, grad in fsdp["grads"].items():
            torch.testing.assert_close(meg["grads"][name], grad, rtol=1e-4, atol=1e-5, msg=name)
