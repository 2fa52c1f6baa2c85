"""HF <-> megatron-core weight conversion (slime.backends.megatron.convert): round trips are bit-exact, the
fused layouts are the ones megatron-core splits, and tensor-parallel shards reassemble to the full tensors."""

from __future__ import annotations

import pytest
import torch

from slime.backends.megatron import convert


def _random_hf(model_type: str, tied: bool, vocab: int = 101) -> tuple[dict, object]:
    """A tiny HF model's state dict with every tensor random (HF initialises norms to ones, which would hide
    a swapped norm)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    config_cls, model_cls = (Qwen3Config, Qwen3ForCausalLM) if model_type == "qwen3" else (LlamaConfig, LlamaForCausalLM)
    config = config_cls(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=tied)
    torch.manual_seed(0)
    model = model_cls(config)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_()
    return model.state_dict(), config


def _expected_hf(hf: dict, tied: bool) -> dict:
    return {k: v for k, v in hf.items() if not (tied and k == "lm_head.weight")}


CASES = [("qwen3", True), ("qwen3", False), ("llama", True), ("llama", False)]


@pytest.mark.parametrize("model_type,tied", CASES, ids=[f"{m}-{'tied' if t else 'untied'}" for m, t in CASES])
def test_round_trip_is_bit_exact(model_type, tied):
    hf, config = _random_hf(model_type, tied)
    layout = convert.ModelLayout.from_hf_config(config)
    padded = convert.padded_vocab_size(layout.vocab_size, tp_size=2)
    mc = convert.hf_to_megatron(hf, layout, padded_vocab=padded)
    assert mc["embedding.word_embeddings.weight"].shape == (padded, 32)
    assert ("output_layer.weight" in mc) == (not tied)
    assert any("q_layernorm" in k for k in mc) == (model_type == "qwen3")
    back = convert.megatron_to_hf(mc, layout)
    expected = _expected_hf(hf, tied)
    assert back.keys() == expected.keys()
    for name, tensor in expected.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor), name


@pytest.mark.parametrize("model_type,tied", [("qwen3", True), ("qwen3", False), ("llama", False)],
                         ids=["qwen3-tied", "qwen3-untied", "llama-untied"])
def test_round_trip_through_tp_shards_and_local_names(model_type, tied):
    hf, config = _random_hf(model_type, tied)
    layout = convert.ModelLayout.from_hf_config(config)
    padded = convert.padded_vocab_size(layout.vocab_size, tp_size=2)
    convert.check_tp_size(layout, 2, padded)
    mc = convert.to_local_spec_names(convert.hf_to_megatron(hf, layout, padded))
    assert "decoder.layers.0.input_layernorm.weight" in mc and "decoder.layers.1.pre_mlp_layernorm.weight" in mc
    shards = [convert.shard_state_dict(mc, 2, rank) for rank in range(2)]
    assert shards[0]["decoder.layers.0.self_attention.linear_qkv.weight"].shape == (32 // 2 * 2, 32)
    assert shards[1]["decoder.layers.0.self_attention.linear_proj.weight"].shape == (32, 16)
    assert shards[1]["embedding.word_embeddings.weight"].shape == (padded // 2, 32)
    back = convert.megatron_to_hf(convert.unshard_state_dicts(shards), layout)
    for name, tensor in _expected_hf(hf, tied).items():
        assert torch.equal(back[name], tensor), name


def test_qkv_is_interleaved_by_query_group():
    """Rows of group g are: its q heads, then its k head, then its v head (megatron-core's split order)."""
    _, config = _random_hf("qwen3", True)
    layout = convert.ModelLayout.from_hf_config(config)  # 4 q heads, 2 groups, head_dim 8
    d = layout.head_dim
    q = (torch.arange(4 * d).float() + 1000)[:, None].expand(-1, 3)  # every row tells where it came from
    k = (torch.arange(2 * d).float() + 2000)[:, None].expand(-1, 3)
    v = (torch.arange(2 * d).float() + 3000)[:, None].expand(-1, 3)
    fused = convert.fuse_qkv(q, k, v, layout)
    expected = []
    for group in range(2):
        expected += [q[group * 2 * d:(group + 1) * 2 * d], k[group * d:(group + 1) * d], v[group * d:(group + 1) * d]]
    assert torch.equal(fused, torch.cat(expected))
    # the TP shard of rank 1 (of 2) is exactly group 1: its q heads 2-3, k1 and v1
    shard = convert.shard_tensor("decoder.layers.0.self_attention.linear_qkv.weight", fused, 2, 1)
    assert torch.equal(shard, torch.cat(expected[3:]))


def test_fc1_shard_keeps_gate_and_up_halves():
    ffn, hidden = 6, 2
    fc1 = torch.cat([torch.full((ffn, hidden), 1.0), torch.full((ffn, hidden), 2.0)])
    fc1 += torch.arange(2 * ffn).float()[:, None]
    shard = convert.shard_tensor("decoder.layers.3.mlp.linear_fc1.weight", fc1, 3, 1)
    assert torch.equal(shard, torch.cat([fc1[2:4], fc1[ffn + 2:ffn + 4]]))
    assert convert.partition_kind("decoder.layers.3.mlp.linear_fc1.layer_norm_weight") == "replicated"
    assert convert.partition_kind("decoder.layers.3.mlp.linear_fc2.weight") == "row"


def test_padded_vocab_size():
    assert convert.padded_vocab_size(151936, 1) == 151936
    assert convert.padded_vocab_size(151936, 8) == 152576
    assert convert.padded_vocab_size(4105, 2) == 4352


def test_bad_inputs_are_reported():
    hf, config = _random_hf("qwen3", False)
    layout = convert.ModelLayout.from_hf_config(config)
    with pytest.raises(convert.ConversionError, match="no Megatron counterpart"):
        convert.hf_to_megatron({**hf, "model.layers.0.self_attn.q_proj.bias": torch.zeros(32)}, layout)
    missing = dict(hf)
    del missing["lm_head.weight"]
    with pytest.raises(convert.ConversionError, match="lm_head"):
        convert.hf_to_megatron(missing, layout)
    with pytest.raises(convert.ConversionError, match="num_key_value_heads 2"):
        convert.check_tp_size(layout, 4, convert.padded_vocab_size(layout.vocab_size, 4))
    tied_hf, tied_config = _random_hf("llama", True)
    tied_hf["lm_head.weight"] = tied_hf["lm_head.weight"].clone() + 1
    with pytest.raises(convert.ConversionError, match="differs"):
        convert.hf_to_megatron(tied_hf, convert.ModelLayout.from_hf_config(tied_config))
    config.model_type = "gpt2"
    with pytest.raises(convert.ConversionError, match="not supported"):
        convert.ModelLayout.from_hf_config(config)


def test_with_own_storage_copies_views_only():
    """The unpadded embedding and the gate/up halves of fc1 are views; huggingface_hub's sharded
    save_torch_state_dict refuses tensors that share or only partly cover a storage."""
    hf, config = _random_hf("qwen3", True)
    layout = convert.ModelLayout.from_hf_config(config)
    back = convert.megatron_to_hf(convert.hf_to_megatron(hf, layout, padded_vocab=256), layout)
    owned = convert.with_own_storage(back)
    for name, tensor in owned.items():
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), name
        assert torch.equal(tensor, back[name])
    assert owned["model.norm.weight"] is back["model.norm.weight"]  # already its own: not copied
    assert owned["model.embed_tokens.weight"] is not back["model.embed_tokens.weight"]


@pytest.mark.parametrize("tp,spec", [(1, "local"), (2, "transformer_engine")])
def test_checkpoint_files_round_trip(tmp_path, tp, spec):
    """save_megatron_checkpoint writes Megatron-LM's legacy layout (tracker + release/mp_rank_RR files) plus the
    metadata JSON; load_megatron_checkpoint reassembles the full state dict bit for bit."""
    import json

    hf, config = _random_hf("llama", False, vocab=301)
    hf = {k: v.to(torch.bfloat16) for k, v in hf.items()}  # dtypes are kept
    layout = convert.ModelLayout.from_hf_config(config)
    padded = convert.padded_vocab_size(layout.vocab_size, tp, 64)
    mc = convert.hf_to_megatron(hf, layout, padded_vocab=padded)
    messages = []
    metadata = convert.save_megatron_checkpoint(tmp_path, mc, layout, tp, vocab_divisor=64, layer_spec=spec,
                                                progress=messages.append)
    assert (tmp_path / convert.TRACKER_FILE).read_text() == "release"
    assert metadata == json.loads((tmp_path / convert.CHECKPOINT_METADATA).read_text())
    assert metadata["dtype"] == "bfloat16" and metadata["padded_vocab_size"] == padded == 64 * tp * -(-301 // (64 * tp))
    assert metadata["files"] == [f"release/mp_rank_{r:02d}/model_optim_rng.pt" for r in range(tp)]
    assert len(messages) == tp
    rank0 = torch.load(tmp_path / convert.rank_file(0), weights_only=True)
    assert rank0["checkpoint_version"] == 3.0 and rank0["tensor_model_parallel_rank"] == 0
    norm = "decoder.layers.0.input_layernorm.weight" if spec == "local" else \
        "decoder.layers.0.self_attention.linear_qkv.layer_norm_weight"
    assert norm in rank0["model"]
    assert rank0["model"]["output_layer.weight"].shape == (padded // tp, 32)
    full, read_metadata = convert.load_megatron_checkpoint(tmp_path)
    assert read_metadata == metadata
    assert full.keys() == mc.keys()
    assert all(torch.equal(full[k], mc[k]) and full[k].dtype == torch.bfloat16 for k in mc)
    back = convert.megatron_to_hf(full, layout)
    assert back.keys() == hf.keys() and all(torch.equal(back[k], hf[k]) for k in hf)


def test_backend_reads_hf_folders_and_converted_checkpoints_alike(tmp_path):
    """`read_weights_as_hf` (what the megatron actor loads --ref-load and its weights through) gives the same HF
    state dict from an HF folder and from the converted checkpoint of it."""
    from safetensors.torch import save_file

    hf, config = _random_hf("llama", False, vocab=301)
    (tmp_path / "hf").mkdir()
    save_file(hf, str(tmp_path / "hf" / "model.safetensors"))
    layout = convert.ModelLayout.from_hf_config(config)
    padded = convert.padded_vocab_size(layout.vocab_size, 2, 64)
    convert.save_megatron_checkpoint(tmp_path / "mc", convert.hf_to_megatron(hf, layout, padded_vocab=padded), layout,
                                     2, vocab_divisor=64, layer_spec="transformer_engine")
    for folder in (tmp_path / "hf", tmp_path / "mc"):
        read = convert.read_weights_as_hf(folder, config)
        assert read.keys() == hf.keys() and all(torch.equal(read[k], hf[k]) for k in hf), folder


def test_checkpoint_files_bad_inputs(tmp_path):
    hf, config = _random_hf("qwen3", True)
    layout = convert.ModelLayout.from_hf_config(config)
    mc = convert.hf_to_megatron(hf, layout, padded_vocab=convert.padded_vocab_size(layout.vocab_size, 2))
    with pytest.raises(convert.ConversionError, match="needs 128"):  # padded for TP 2 (256), written at TP 1
        convert.save_megatron_checkpoint(tmp_path / "a", mc, layout, 1)
    with pytest.raises(convert.ConversionError, match="does not divide num_key_value_heads"):
        convert.save_megatron_checkpoint(tmp_path / "a", mc, layout, 4)
    with pytest.raises(convert.ConversionError, match="no slime_megatron_checkpoint.json"):
        convert.load_megatron_checkpoint(tmp_path)
    convert.save_megatron_checkpoint(tmp_path / "b", mc, layout, 2)
    other = convert.ModelLayout.from_hf_config(_random_hf("qwen3", False)[1])
    with pytest.raises(convert.ConversionError, match="tied_embeddings True .HF config: False"):
        convert.check_checkpoint_layout(convert.read_checkpoint_metadata(tmp_path / "b"), other)
    (tmp_path / "b" / convert.rank_file(1)).unlink()
    with pytest.raises(convert.ConversionError, match="mp_rank_01/model_optim_rng.pt is missing"):
        convert.load_megatron_checkpoint(tmp_path / "b")
    with pytest.raises(convert.ConversionError, match=r"holds no \*\.safetensors weights"):
        convert.read_hf_weights(tmp_path)


# Qwen3 config.json values (Qwen/Qwen3-{0.6B,1.7B,4B,8B} on the HF hub): what the MODEL_ARGS files must match
QWEN3_CONFIGS = {
    "0.6B": dict(num_hidden_layers=28, hidden_size=1024, intermediate_size=3072, num_attention_heads=16, tied=True),
    "1.7B": dict(num_hidden_layers=28, hidden_size=2048, intermediate_size=6144, num_attention_heads=16, tied=True),
    "4B": dict(num_hidden_layers=36, hidden_size=2560, intermediate_size=9728, num_attention_heads=32, tied=True),
    "8B": dict(num_hidden_layers=36, hidden_size=4096, intermediate_size=12288, num_attention_heads=32, tied=False),
}


@pytest.mark.parametrize("size", sorted(QWEN3_CONFIGS))
def test_model_args_files_parse_and_match_the_hf_config(size):
    import subprocess
    from pathlib import Path

    from transformers import Qwen3Config

    from slime.backends.megatron.model import check_model_args
    from slime.utils.arguments import build_parser

    repo = Path(__file__).resolve().parents[2]
    script = repo / "Megatron-LM" / "scripts" / "models" / f"qwen3-{size}.sh"
    # the upstream-style path is a relative symlink to the same folder
    assert (repo / "slime" / "scripts" / "models" / script.name).resolve() == script.resolve()
    words = subprocess.run(["bash", "-c", f'source "{script}" && printf "%s\\n" "${{MODEL_ARGS[@]}}"'],
                           capture_output=True, text=True, check=True).stdout.split("\n")[:-1]
    args = build_parser().parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "1", *words])
    facts = dict(QWEN3_CONFIGS[size])
    config = Qwen3Config(vocab_size=151936, num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                         rope_theta=1000000.0, tie_word_embeddings=facts.pop("tied"), **facts)
    check_model_args(args, config)  # raises on any disagreement
    config.num_hidden_layers += 1
    with pytest.raises(convert.ConversionError, match="--num-layers"):
        check_model_args(args, config)
