"""Tensor-parallel layout checks and gradient helpers that need no process group."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, Qwen2Config, Qwen3Config, Qwen3MoeConfig

from slime.backends.fsdp.gradients import clip_grad_norm
from slime.backends.fsdp.parallel import data_parallel_size
from slime.backends.fsdp.tensor_parallel import FAMILIES, TensorParallelError, check_tensor_parallel

# SmolLM2-135M-Instruct (the embedded default): 9 heads, 3 KV heads, so only TP 1 or 3 fits it
SMOLLM2 = dict(hidden_size=576, intermediate_size=1536, num_attention_heads=9, num_key_value_heads=3)
# Qwen3-4B
QWEN3_4B = dict(hidden_size=2560, intermediate_size=9728, num_attention_heads=32, num_key_value_heads=8,
                head_dim=128)


def test_data_parallel_size_is_ranks_over_tensor_parallel_size():
    assert data_parallel_size(8, 2) == 4
    assert data_parallel_size(8, None) == 8  # flag absent
    assert data_parallel_size(4, 4) == 1
    with pytest.raises(ValueError, match="does not divide the 6 training ranks"):
        data_parallel_size(6, 4)
    with pytest.raises(ValueError, match=">= 1"):
        data_parallel_size(4, 0)


@pytest.mark.parametrize("config,tp", [(Qwen3Config(**QWEN3_4B), 8), (LlamaConfig(**SMOLLM2), 3),
                                       (Qwen2Config(hidden_size=64, intermediate_size=192, num_attention_heads=4,
                                                    num_key_value_heads=2), 2)])
def test_supported_layouts_pass(config, tp):
    plan = check_tensor_parallel(config, tp, world_size=2 * tp)
    assert plan is FAMILIES[config.model_type]


def test_qwen3_plan_sums_the_per_head_norm_gradients_and_llama_has_none():
    assert check_tensor_parallel(Qwen3Config(**QWEN3_4B), 2, 2).head_norms == ("q_norm", "k_norm")
    assert check_tensor_parallel(LlamaConfig(**SMOLLM2), 3, 3).head_norms == ()


@pytest.mark.parametrize("config,tp,message", [
    (LlamaConfig(**SMOLLM2), 2, "num_attention_heads = 9, num_key_value_heads = 3"),
    (Qwen3Config(**QWEN3_4B), 16, "num_key_value_heads = 8"),  # 32 heads split, 8 KV heads do not
    (Qwen3Config(**{**QWEN3_4B, "intermediate_size": 9730}), 4, "intermediate_size = 9730"),
])
def test_sizes_the_tensor_parallel_size_must_divide(config, tp, message):
    with pytest.raises(TensorParallelError, match=message):
        check_tensor_parallel(config, tp, world_size=tp)


def test_tensor_parallel_size_must_divide_the_ranks():
    with pytest.raises(TensorParallelError, match="does not divide the 6 training ranks"):
        check_tensor_parallel(Qwen3Config(**QWEN3_4B), 4, world_size=6)


def test_unsupported_family_names_the_supported_ones():
    with pytest.raises(TensorParallelError, match="'qwen3_moe'.*llama, mistral, qwen2, qwen3"):
        check_tensor_parallel(Qwen3MoeConfig(), 2, world_size=2)


def test_lora_with_tensor_parallel_is_rejected():
    with pytest.raises(TensorParallelError, match="--use-lora cannot be combined"):
        check_tensor_parallel(Qwen3Config(**QWEN3_4B), 2, world_size=2, use_lora=True)


@pytest.mark.parametrize("max_norm", [0.5, 100.0, None])
def test_clip_grad_norm_on_plain_tensors_matches_torch(max_norm):
    generator = torch.Generator().manual_seed(0)
    ours = [torch.nn.Parameter(torch.zeros(s)) for s in ((3, 4), (5,), (2, 2))]
    theirs = [torch.nn.Parameter(torch.zeros(s)) for s in ((3, 4), (5,), (2, 2))]
    for a, b in zip(ours, theirs):
        a.grad = torch.randn(a.shape, generator=generator)
        b.grad = a.grad.clone()
    ours.append(torch.nn.Parameter(torch.zeros(2)))  # no gradient: ignored
    norm = clip_grad_norm(ours, max_norm)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm or float("inf"))
    assert norm == pytest.approx(float(expected), rel=1e-6)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a.grad, b.grad, atol=1e-6)
    if max_norm == 0.5:  # the case that clips
        assert float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in ours[:3]]))) == \
            pytest.approx(0.5, rel=1e-4)


def test_attention_modules_that_store_head_counts_get_per_rank_values():
    """transformers 5 reshapes with -1 heads (nothing to change); implementations that size their reshapes
    from `num_heads`-style attributes must see this rank's share."""
    from slime.backends.fsdp.tensor_parallel import localise_head_counts

    attention = torch.nn.Module()
    attention.num_heads, attention.num_key_value_heads, attention.head_dim = 32, 8, 128
    localise_head_counts(attention, 4)
    assert (attention.num_heads, attention.num_key_value_heads, attention.head_dim) == (8, 2, 128)
    modern = torch.nn.Module()  # the installed Qwen3/Llama attention: head_dim and the group ratio only
    modern.head_dim, modern.num_key_value_groups = 128, 4
    localise_head_counts(modern, 4)
    assert (modern.head_dim, modern.num_key_value_groups) == (128, 4) and not hasattr(modern, "num_heads")
