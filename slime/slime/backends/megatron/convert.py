"""HF <-> megatron-core weight conversion for dense Qwen3 and Llama models, as pure functions on state dicts.

Megatron layout (the names of megatron-core's Transformer-Engine layer spec, which are also the names
its distributed checkpoints use for the local spec through `sharded_state_dict_keys_map`):

    embedding.word_embeddings.weight                       [V_pad, h]   (vocab padded, see padded_vocab_size)
    decoder.layers.{i}.self_attention.linear_qkv.layer_norm_weight       input RMSNorm, folded into the QKV GEMM
    decoder.layers.{i}.self_attention.linear_qkv.weight    [ng * (nq/ng + 2) * d, h]   fused, per query group
    decoder.layers.{i}.self_attention.{q,k}_layernorm.weight             Qwen3 per-head RMSNorm
    decoder.layers.{i}.self_attention.linear_proj.weight   [h, nq * d]
    decoder.layers.{i}.mlp.linear_fc1.layer_norm_weight                  post-attention RMSNorm
    decoder.layers.{i}.mlp.linear_fc1.weight               [2 * ffn, h]  gate rows, then up rows
    decoder.layers.{i}.mlp.linear_fc2.weight               [h, ffn]
    decoder.final_layernorm.weight
    output_layer.weight                                    [V_pad, h]   (absent when embeddings are tied)

The fused QKV is interleaved by query group (q heads of group 0, k0, v0, q heads of group 1, k1, v1, ...):
that is the order `SelfAttention.get_query_key_value_tensors` splits it in, and it makes the tensor-parallel
shard of rank r simply rows [r/tp, (r+1)/tp) (each rank owns whole groups). The local spec (no Transformer
Engine) keeps the two norms as separate modules; `to_local_spec_names` renames them.

Conversion only moves and concatenates tensors, so HF -> Megatron -> HF returns the same bits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

SUPPORTED_MODEL_TYPES = ("qwen3", "llama")
# megatron-core pads the vocabulary to a multiple of this times the TP size (Megatron's --make-vocab-size-divisible-by)
DEFAULT_VOCAB_DIVISOR = 128


class ConversionError(ValueError):
    """A state dict or config that does not fit the supported architectures."""


@dataclass(frozen=True)
class ModelLayout:
    """The architecture facts conversion and sharding need, read from an HF config."""

    model_type: str
    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    qk_layernorm: bool

    @classmethod
    def from_hf_config(cls, config) -> "ModelLayout":
        model_type = getattr(config, "model_type", None)
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise ConversionError(f"model_type {model_type!r} is not supported by the Megatron backend "
                                  f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
        for flag in ("attention_bias", "mlp_bias"):
            if getattr(config, flag, False):
                raise ConversionError(f"{model_type} with {flag}=True is not supported (no linear biases)")
        heads = config.num_attention_heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        if heads % kv_heads:
            raise ConversionError(f"num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
        return cls(model_type=model_type, num_layers=config.num_hidden_layers, hidden_size=config.hidden_size,
                   ffn_hidden_size=config.intermediate_size, num_heads=heads, num_kv_heads=kv_heads,
                   head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
                   vocab_size=config.vocab_size, tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
                   qk_layernorm=model_type == "qwen3")

    @property
    def heads_per_group(self) -> int:
        return self.num_heads // self.num_kv_heads


def padded_vocab_size(vocab_size: int, tp_size: int, divisor: int = DEFAULT_VOCAB_DIVISOR) -> int:
    """Smallest multiple of `divisor * tp_size` >= `vocab_size` (each TP rank holds an equal vocab slice)."""
    multiple = divisor * tp_size
    return -(-vocab_size // multiple) * multiple


# ---------------------------------------------------------------------------------------- fused tensors

def fuse_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: ModelLayout) -> torch.Tensor:
    """[nq*d, h], [ng*d, h], [ng*d, h] -> [ng * (nq/ng + 2) * d, h], interleaved by query group."""
    ng, d = layout.num_kv_heads, layout.head_dim
    hidden = q.shape[1]
    grouped = torch.cat([q.reshape(ng, layout.heads_per_group * d, hidden), k.reshape(ng, d, hidden),
                         v.reshape(ng, d, hidden)], dim=1)
    return grouped.reshape(-1, hidden)


def split_qkv(qkv: torch.Tensor, layout: ModelLayout) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inverse of `fuse_qkv`."""
    ng, d = layout.num_kv_heads, layout.head_dim
    hidden = qkv.shape[1]
    q_rows = layout.heads_per_group * d
    grouped = qkv.reshape(ng, q_rows + 2 * d, hidden)
    q, k, v = torch.split(grouped, [q_rows, d, d], dim=1)
    return q.reshape(-1, hidden), k.reshape(-1, hidden), v.reshape(-1, hidden)


def _pad_rows(weight: torch.Tensor, rows: int) -> torch.Tensor:
    if rows < weight.shape[0]:
        raise ConversionError(f"padded vocab {rows} is smaller than the vocabulary {weight.shape[0]}")
    if rows == weight.shape[0]:
        return weight
    return torch.cat([weight, weight.new_zeros(rows - weight.shape[0], weight.shape[1])])


# ------------------------------------------------------------------------------------------- HF -> mcore

def hf_to_megatron(hf: dict[str, torch.Tensor], layout: ModelLayout,
                   padded_vocab: int | None = None) -> dict[str, torch.Tensor]:
    """Convert a full HF state dict to megatron-core names and fused layouts (see module docstring).

    `padded_vocab`: rows of the embedding / output layer (default: the vocabulary, no padding); the extra
    rows are zeros. Every HF tensor must be used: an unexpected key raises, so nothing is dropped silently.
    """
    padded_vocab = padded_vocab or layout.vocab_size
    remaining = dict(hf)

    def take(name: str) -> torch.Tensor:
        try:
            return remaining.pop(name)
        except KeyError:
            raise ConversionError(f"HF state dict lacks {name!r}") from None

    out = {"embedding.word_embeddings.weight": _pad_rows(take("model.embed_tokens.weight"), padded_vocab)}
    for i in range(layout.num_layers):
        hf_prefix, mc = f"model.layers.{i}.", f"decoder.layers.{i}."
        attn = hf_prefix + "self_attn."
        out[mc + "self_attention.linear_qkv.layer_norm_weight"] = take(hf_prefix + "input_layernorm.weight")
        out[mc + "self_attention.linear_qkv.weight"] = fuse_qkv(
            take(attn + "q_proj.weight"), take(attn + "k_proj.weight"), take(attn + "v_proj.weight"), layout)
        if layout.qk_layernorm:
            out[mc + "self_attention.q_layernorm.weight"] = take(attn + "q_norm.weight")
            out[mc + "self_attention.k_layernorm.weight"] = take(attn + "k_norm.weight")
        out[mc + "self_attention.linear_proj.weight"] = take(attn + "o_proj.weight")
        out[mc + "mlp.linear_fc1.layer_norm_weight"] = take(hf_prefix + "post_attention_layernorm.weight")
        out[mc + "mlp.linear_fc1.weight"] = torch.cat(
            [take(hf_prefix + "mlp.gate_proj.weight"), take(hf_prefix + "mlp.up_proj.weight")])
        out[mc + "mlp.linear_fc2.weight"] = take(hf_prefix + "mlp.down_proj.weight")
    out["decoder.final_layernorm.weight"] = take("model.norm.weight")
    lm_head = remaining.pop("lm_head.weight", None)
    if layout.tied_embeddings and lm_head is not None and not (
            lm_head.data_ptr() == hf["model.embed_tokens.weight"].data_ptr() or
            torch.equal(lm_head, hf["model.embed_tokens.weight"])):
        raise ConversionError("tie_word_embeddings is True but lm_head.weight differs from the embeddings")
    if not layout.tied_embeddings:
        if lm_head is None:
            raise ConversionError("HF state dict lacks 'lm_head.weight' (tie_word_embeddings is False)")
        out["output_layer.weight"] = _pad_rows(lm_head, padded_vocab)
    if remaining:
        raise ConversionError(f"HF tensors with no Megatron counterpart: {sorted(remaining)[:8]}")
    return out


# ------------------------------------------------------------------------------------------- mcore -> HF

def megatron_to_hf(mc: dict[str, torch.Tensor], layout: ModelLayout) -> dict[str, torch.Tensor]:
    """Convert a full (unsharded) megatron-core state dict back to HF names; the vocab padding is dropped.

    Local-spec names (`input_layernorm`, `pre_mlp_layernorm`) are accepted too. Transformer Engine's
    `_extra_state` entries (FP8 metadata, no weights) are skipped.
    """
    remaining = {k: v for k, v in to_te_spec_names(mc).items() if not k.endswith("_extra_state")}

    def take(name: str) -> torch.Tensor:
        try:
            return remaining.pop(name)
        except KeyError:
            raise ConversionError(f"Megatron state dict lacks {name!r}") from None

    vocab = layout.vocab_size
    out = {"model.embed_tokens.weight": take("embedding.word_embeddings.weight")[:vocab]}
    for i in range(layout.num_layers):
        hf_prefix, mc_prefix = f"model.layers.{i}.", f"decoder.layers.{i}."
        attn = hf_prefix + "self_attn."
        out[hf_prefix + "input_layernorm.weight"] = take(mc_prefix + "self_attention.linear_qkv.layer_norm_weight")
        q, k, v = split_qkv(take(mc_prefix + "self_attention.linear_qkv.weight"), layout)
        out[attn + "q_proj.weight"], out[attn + "k_proj.weight"], out[attn + "v_proj.weight"] = q, k, v
        if layout.qk_layernorm:
            out[attn + "q_norm.weight"] = take(mc_prefix + "self_attention.q_layernorm.weight")
            out[attn + "k_norm.weight"] = take(mc_prefix + "self_attention.k_layernorm.weight")
        out[attn + "o_proj.weight"] = take(mc_prefix + "self_attention.linear_proj.weight")
        out[hf_prefix + "post_attention_layernorm.weight"] = take(mc_prefix + "mlp.linear_fc1.layer_norm_weight")
        gate, up = torch.chunk(take(mc_prefix + "mlp.linear_fc1.weight"), 2, dim=0)
        out[hf_prefix + "mlp.gate_proj.weight"], out[hf_prefix + "mlp.up_proj.weight"] = gate, up
        out[hf_prefix + "mlp.down_proj.weight"] = take(mc_prefix + "mlp.linear_fc2.weight")
    out["model.norm.weight"] = take("decoder.final_layernorm.weight")
    if not layout.tied_embeddings:
        out["lm_head.weight"] = take("output_layer.weight")[:vocab]
    if remaining:
        raise ConversionError(f"Megatron tensors with no HF counterpart: {sorted(remaining)[:8]}")
    # slices are views of the padded tensors: give HF contiguous tensors of their own (safetensors needs it)
    return {name: tensor.contiguous() for name, tensor in out.items()}


# ---------------------------------------------------------------------------------- local vs TE naming

_TE_TO_LOCAL = (("self_attention.linear_qkv.layer_norm_weight", "input_layernorm.weight"),
                ("mlp.linear_fc1.layer_norm_weight", "pre_mlp_layernorm.weight"))


def to_local_spec_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename the folded norms to the separate modules of `get_gpt_layer_local_spec`."""
    out = {}
    for name, tensor in sd.items():
        for te_name, local_name in _TE_TO_LOCAL:
            if name.endswith(te_name):
                name = name[: -len(te_name)] + local_name
                break
        out[name] = tensor
    return out


def to_te_spec_names(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of `to_local_spec_names` (names already in TE form pass through)."""
    out = {}
    for name, tensor in sd.items():
        for te_name, local_name in _TE_TO_LOCAL:
            if name.endswith(local_name) and ".layers." in name:
                name = name[: -len(local_name)] + te_name
                break
        out[name] = tensor
    return out


# ------------------------------------------------------------------------------- tensor-parallel shards

_COLUMN = re.compile(r"(linear_qkv\.weight|word_embeddings\.weight|output_layer\.weight)$")
_ROW = re.compile(r"(linear_proj\.weight|linear_fc2\.weight)$")
_GATED_COLUMN = re.compile(r"linear_fc1\.weight$")


def partition_kind(name: str) -> str:
    """'column' (split output rows), 'gated_column' (gate and up halves split separately), 'row' (split
    input columns) or 'replicated' (norms), following megatron-core's Column/RowParallelLinear and
    VocabParallelEmbedding."""
    if _GATED_COLUMN.search(name):
        return "gated_column"
    if _COLUMN.search(name):
        return "column"
    if _ROW.search(name):
        return "row"
    return "replicated"


def check_tp_size(layout: ModelLayout, tp_size: int, padded_vocab: int) -> None:
    """Raise unless every sharded dimension splits evenly (whole query groups per rank)."""
    problems = []
    if layout.num_kv_heads % tp_size:
        problems.append(f"num_key_value_heads {layout.num_kv_heads}")
    if layout.num_heads % tp_size:
        problems.append(f"num_attention_heads {layout.num_heads}")
    if layout.ffn_hidden_size % tp_size:
        problems.append(f"intermediate_size {layout.ffn_hidden_size}")
    if padded_vocab % tp_size:
        problems.append(f"padded vocab {padded_vocab}")
    if problems:
        raise ConversionError(f"--tensor-model-parallel-size {tp_size} does not divide " + ", ".join(problems))


def shard_tensor(name: str, full: torch.Tensor, tp_size: int, tp_rank: int) -> torch.Tensor:
    """The slice of `full` that TP rank `tp_rank` of `tp_size` holds (a contiguous copy)."""
    kind = partition_kind(name)
    if kind == "replicated" or tp_size == 1:
        return full
    if kind == "column":
        return torch.chunk(full, tp_size, dim=0)[tp_rank].contiguous()
    if kind == "row":
        return torch.chunk(full, tp_size, dim=1)[tp_rank].contiguous()
    gate, up = torch.chunk(full, 2, dim=0)
    return torch.cat([torch.chunk(gate, tp_size)[tp_rank], torch.chunk(up, tp_size)[tp_rank]])


def unshard_tensor(name: str, shards: list[torch.Tensor]) -> torch.Tensor:
    """Inverse of `shard_tensor`: the full tensor from the shards of TP ranks 0..tp-1, in rank order."""
    kind = partition_kind(name)
    if kind == "replicated" or len(shards) == 1:
        return shards[0]
    if kind == "column":
        return torch.cat(shards, dim=0)
    if kind == "row":
        return torch.cat(shards, dim=1)
    halves = [torch.chunk(shard, 2, dim=0) for shard in shards]
    return torch.cat([h[0] for h in halves] + [h[1] for h in halves])


def shard_state_dict(sd: dict[str, torch.Tensor], tp_size: int, tp_rank: int) -> dict[str, torch.Tensor]:
    return {name: shard_tensor(name, tensor, tp_size, tp_rank) for name, tensor in sd.items()}


def unshard_state_dicts(shards: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    names = shards[0].keys()
    for rank, shard in enumerate(shards[1:], start=1):
        if shard.keys() != names:
            raise ConversionError(f"TP rank {rank} holds different tensors than rank 0: "
                                  f"{sorted(set(shard) ^ set(names))[:8]}")
    return {name: unshard_tensor(name, [shard[name] for shard in shards]) for name in names}
