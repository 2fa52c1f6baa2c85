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

Files (the last section; used by the CLIs in Megatron-LM/tools/): `read_hf_weights` reads an HF folder's
safetensors; `save_megatron_checkpoint` / `load_megatron_checkpoint` write and read per-TP-rank state dicts
in Megatron-LM's legacy `torch` checkpoint layout plus a metadata JSON:

    SAVE/latest_checkpointed_iteration.txt          "release"
    SAVE/release/mp_rank_{tp_rank:02d}/model_optim_rng.pt
        {"model": {name: this rank's shard}, "checkpoint_version": 3.0, "iteration": 0,
         "tensor_model_parallel_rank": r, "tensor_model_parallel_size": tp}
    SAVE/slime_megatron_checkpoint.json            format, TP size, layer-spec names, dtype, ModelLayout, padded vocab
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

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


# --------------------------------------------------------------------------------------------------- files

CHECKPOINT_FORMAT = "slime-megatron-torch"
CHECKPOINT_FORMAT_VERSION = 1
CHECKPOINT_METADATA = "slime_megatron_checkpoint.json"
TRACKER_FILE = "latest_checkpointed_iteration.txt"  # Megatron-LM's name; holds "release" for converted weights
RELEASE = "release"
RANK_FILE = "model_optim_rng.pt"
LAYER_SPECS = ("transformer_engine", "local")

Progress = Callable[[str], None]


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def rank_file(tp_rank: int) -> str:
    """Path of TP rank `tp_rank`'s state dict inside a checkpoint folder (pipeline size 1)."""
    return f"{RELEASE}/mp_rank_{tp_rank:02d}/{RANK_FILE}"


def read_hf_weights(folder: str | Path, progress: Progress | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of an HF folder's `*.safetensors` files (one file or sharded), dtypes as stored."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise ConversionError(f"{folder} holds no *.safetensors weights (only safetensors are read: re-save a "
                              ".bin checkpoint with transformers' save_pretrained)")
    weights: dict[str, torch.Tensor] = {}
    for index, file in enumerate(files, start=1):
        _say(progress, f"reading {file.name} ({index}/{len(files)})")
        part = load_file(str(file))
        clash = weights.keys() & part.keys()
        if clash:
            raise ConversionError(f"{file.name} repeats tensors of an earlier file: {sorted(clash)[:4]}")
        weights.update(part)
    return weights


def _own_storage(tensor: torch.Tensor) -> torch.Tensor:
    """torch.save writes a view's whole storage: give slices a storage of their own."""
    if tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size() and tensor.is_contiguous():
        return tensor
    return tensor.contiguous().clone()


def with_own_storage(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Copy the tensors that are views of a larger or shared storage (`megatron_to_hf` returns the embedding
    without its padding rows and gate/up as halves of fc1 that way). safetensors' `save_file` writes views
    as they are; huggingface_hub's sharded `save_torch_state_dict` refuses them."""
    return {name: _own_storage(tensor) for name, tensor in sd.items()}


def save_megatron_checkpoint(folder: str | Path, mc: dict[str, torch.Tensor], layout: ModelLayout, tp_size: int, *,
                             vocab_divisor: int = DEFAULT_VOCAB_DIVISOR, layer_spec: str = "transformer_engine",
                             source: str | None = None, progress: Progress | None = None) -> dict:
    """Write a full megatron-core state dict (`hf_to_megatron`'s output, TE-spec or local-spec names) as the
    per-TP-rank files of the layout in the module docstring; returns the metadata written.

    `layer_spec`: the names the files use, "transformer_engine" (megatron-core's default and what GPU runs
    build) or "local" (`get_gpt_layer_local_spec`, no Transformer Engine). The embedding's rows must already
    be padded to `padded_vocab_size(vocab, tp_size, vocab_divisor)`.
    """
    if layer_spec not in LAYER_SPECS:
        raise ConversionError(f"layer_spec must be one of {LAYER_SPECS}, got {layer_spec!r}")
    padded = padded_vocab_size(layout.vocab_size, tp_size, vocab_divisor)
    check_tp_size(layout, tp_size, padded)
    full = to_te_spec_names(mc) if layer_spec == "transformer_engine" else to_local_spec_names(mc)
    rows = full["embedding.word_embeddings.weight"].shape[0]
    if rows != padded:
        raise ConversionError(f"the embedding has {rows} rows; TP {tp_size} with vocab divisor {vocab_divisor} "
                              f"needs {padded} (hf_to_megatron(..., padded_vocab={padded}))")
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in full.values()})
    folder = Path(folder)
    files = []
    for rank in range(tp_size):
        path = folder / rank_file(rank)
        _say(progress, f"writing TP rank {rank + 1}/{tp_size}: {path.relative_to(folder)}")
        path.parent.mkdir(parents=True, exist_ok=True)
        shard = {name: _own_storage(shard_tensor(name, tensor, tp_size, rank)) for name, tensor in full.items()}
        torch.save({"model": shard, "checkpoint_version": 3.0, "iteration": 0, "tensor_model_parallel_rank": rank,
                    "tensor_model_parallel_size": tp_size}, path)
        files.append(rank_file(rank))
        del shard
    (folder / TRACKER_FILE).write_text(RELEASE)
    metadata = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_FORMAT_VERSION,
                "tensor_model_parallel_size": tp_size, "pipeline_model_parallel_size": 1,
                "layer_spec": layer_spec, "dtype": dtypes[0] if len(dtypes) == 1 else dtypes,
                "make_vocab_size_divisible_by": vocab_divisor, "padded_vocab_size": padded,
                "model": asdict(layout), "num_tensors": len(full), "files": files, "source": source}
    (folder / CHECKPOINT_METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
    return metadata


def read_checkpoint_metadata(folder: str | Path) -> dict:
    """The metadata JSON of a checkpoint written by `save_megatron_checkpoint` (ConversionError otherwise)."""
    folder = Path(folder)
    path = folder / CHECKPOINT_METADATA
    if not path.exists():
        hint = ""
        if (folder / ".metadata").exists() or (folder / "metadata.json").exists() or any(folder.glob("iter_*")):
            hint = (" It looks like a Megatron-LM training checkpoint (torch_dist / iter_* folders): only the "
                    "layout save_megatron_checkpoint writes is supported.")
        raise ConversionError(f"{folder} holds no {CHECKPOINT_METADATA}: not a checkpoint written by "
                              f"convert_hf_to_megatron.py.{hint}")
    try:
        metadata = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConversionError(f"{path} is not valid JSON: {exc}") from None
    if metadata.get("format") != CHECKPOINT_FORMAT or metadata.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise ConversionError(f"{path}: format {metadata.get('format')!r} version {metadata.get('format_version')!r},"
                              f" expected {CHECKPOINT_FORMAT!r} version {CHECKPOINT_FORMAT_VERSION}")
    return metadata


def check_checkpoint_layout(metadata: dict, layout: ModelLayout) -> None:
    """Raise if the checkpoint was converted from a model other than the one `layout` describes."""
    stored = metadata.get("model", {})
    problems = [f"{key} {stored.get(key)!r} (HF config: {value!r})" for key, value in asdict(layout).items()
                if stored.get(key) != value]
    if problems:
        raise ConversionError("the checkpoint does not match the HF config: " + "; ".join(problems))


def read_weights_as_hf(folder: str | Path, hf_config, progress: Progress | None = None) -> dict[str, torch.Tensor]:
    """HF-named weights of `folder`: an HF folder's safetensors, or a checkpoint of `save_megatron_checkpoint`
    (`Megatron-LM/tools/convert_hf_to_megatron.py`) converted back for `hf_config`'s architecture."""
    if not (Path(folder) / CHECKPOINT_METADATA).exists():
        return read_hf_weights(folder, progress)
    full, _ = load_megatron_checkpoint(folder, progress)
    return megatron_to_hf(full, ModelLayout.from_hf_config(hf_config))


def load_megatron_checkpoint(folder: str | Path, progress: Progress | None = None
                             ) -> tuple[dict[str, torch.Tensor], dict]:
    """Read every TP rank's file of a `save_megatron_checkpoint` folder and reassemble the full state dict
    (TE-spec names, vocab still padded: `megatron_to_hf` drops the padding). Returns (state dict, metadata)."""
    folder = Path(folder)
    metadata = read_checkpoint_metadata(folder)
    tp_size = metadata["tensor_model_parallel_size"]
    shards = []
    for rank in range(tp_size):
        path = folder / rank_file(rank)
        if not path.exists():
            raise ConversionError(f"{path} is missing (the metadata says tensor_model_parallel_size {tp_size})")
        _say(progress, f"reading TP rank {rank + 1}/{tp_size}: {rank_file(rank)}")
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if saved.get("tensor_model_parallel_rank", rank) != rank:
            raise ConversionError(f"{path} holds TP rank {saved['tensor_model_parallel_rank']}, expected {rank}")
        shards.append(saved["model"])
    _say(progress, f"merging {tp_size} TP shard(s)")
    full = to_te_spec_names(unshard_state_dicts(shards))
    expected = metadata.get("num_tensors")
    if expected is not None and len(full) != expected:
        raise ConversionError(f"{folder}: {len(full)} tensors, the metadata says {expected}")
    return full, metadata
