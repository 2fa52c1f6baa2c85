"""A checkpoint written by Megatron-LM/tools/convert_hf_to_megatron.py loads into the megatron backend's GPTModel
(`load_state_dict(strict=True)`; the files hold no weightless `_extra_state` entries, which megatron-core accepts)
and computes the HF model's logits. TP=1 in-process on CPU through the test-only shim tests/helpers/megatron_cpu.py;
the TP=2 files hold the slices `convert.shard_tensor` gives, the same ones `model.load_hf_state_dict` copies into
each rank (whose TP=2 logits tests/integration/test_megatron_model.py checks)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("megatron.core")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def megatron_single_process():
    from helpers.megatron_cpu import single_process_model_parallel

    with single_process_model_parallel():
        yield


def _cli(name: str):
    path = REPO / "Megatron-LM" / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_converted_checkpoint_loads_into_gpt_model(megatron_single_process, tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM

    from slime.backends.megatron import convert
    from slime.backends.megatron import model as mmodel

    assert _cli("convert_hf_to_megatron").main(["--hf-checkpoint", str(tiny_model_path), "--save", str(tmp_path),
                                                "--transformer-impl", "local"]) == 0
    weights = torch.load(tmp_path / convert.rank_file(0), weights_only=True)["model"]
    hf = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32).eval()
    gpt = mmodel.build_gpt_model(hf.config, mmodel.ParallelSizes(), cpu_init=True, impl="local")
    gpt.load_state_dict(weights, strict=True)  # megatron-core tolerates the absent `_extra_state` entries
    gpt.eval()
    ids = torch.randint(0, hf.config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = gpt(ids, torch.arange(16).expand_as(ids), None)[..., : hf.config.vocab_size]
        reference = hf(ids).logits
    assert reference.abs().max() > 1
    torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-4)
