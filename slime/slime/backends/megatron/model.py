"""A megatron-core GPTModel built from an HF config (dense Qwen3 and Llama), and HF weights in and out of it.

The architecture always comes from the HF config; Megatron MODEL_ARGS given on the command line
(`--num-layers`, `--rotary-base`, ...) are checked against it (`check_model_args`), as upstream slime's
`hf_validate_args` does, so a wrong MODEL_ARGS file fails loudly instead of training a different model.

Layer spec: Transformer Engine's (`get_gpt_layer_with_transformer_engine_spec`, norms fused into the QKV and
FC1 GEMMs) when `transformer_engine` imports, megatron-core's local spec (`get_gpt_layer_local_spec`, apex
fused norms if apex is installed, torch norms otherwise) otherwise or with `--transformer-impl local`.
Requires `torch.distributed` and megatron-core's `parallel_state` to be initialised (see actor.init_parallel).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from slime.backends.megatron import convert

INSTALL_HINT = "pip install 'slime[megatron]' (megatron-core==0.16.1)"


def transformer_engine_available() -> bool:
    try:
        import transformer_engine  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class ParallelSizes:
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    sequence_parallel: bool = False


@dataclass(frozen=True)
class Recompute:
    granularity: str | None = None  # "full" | "selective"
    method: str | None = None  # "uniform" | "block" (full only)
    num_layers: int | None = None


def rope_theta(hf_config) -> float:
    """RoPE base from an HF config (transformers 5 keeps it in `rope_parameters`, older ones in `rope_theta`);
    scaled RoPE variants are refused because GPTModel's plain rotary embedding would silently differ."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    scaling = getattr(hf_config, "rope_scaling", None) or {}
    rope_type = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise convert.ConversionError(f"rope_type {rope_type!r} is not supported by the Megatron backend "
                                      "(only plain RoPE)")
    return float(params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))


# MODEL_ARGS flag (argparse dest) -> how to read the same fact from the HF config
_MODEL_ARG_CHECKS = {
    "num_layers": lambda c: c.num_hidden_layers,
    "hidden_size": lambda c: c.hidden_size,
    "ffn_hidden_size": lambda c: c.intermediate_size,
    "num_attention_heads": lambda c: c.num_attention_heads,
    "num_query_groups": lambda c: getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
    "kv_channels": lambda c: getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
    "vocab_size": lambda c: c.vocab_size,
    "rotary_base": rope_theta,
    "norm_epsilon": lambda c: c.rms_norm_eps,
    "untie_embeddings_and_output_weights": lambda c: not getattr(c, "tie_word_embeddings", False),
    "qk_layernorm": lambda c: c.model_type == "qwen3",
}


def check_model_args(args, hf_config) -> None:
    """Raise if a Megatron architecture flag that was given disagrees with the HF config."""
    problems = []
    for dest, read in _MODEL_ARG_CHECKS.items():
        given = getattr(args, dest, None)
        if given is None or (isinstance(given, bool) and not given and dest == "qk_layernorm"):
            continue  # not given (store_true flags are only checked when set, except untie which is a fact)
        if dest == "untie_embeddings_and_output_weights" and not _model_args_given(args):
            continue
        expected = read(hf_config)
        if (float(given) != float(expected)) if isinstance(expected, float) else (given != expected):
            problems.append(f"--{dest.replace('_', '-')} {given} (HF config: {expected})")
    if problems:
        raise convert.ConversionError("MODEL_ARGS disagree with --hf-checkpoint's config.json: " + "; ".join(problems))


def _model_args_given(args) -> bool:
    # --untie-embeddings-and-output-weights is a store_true flag: its absence only means "tied" when a
    # MODEL_ARGS file was actually passed (recognised by --num-layers, which every such file sets)
    return getattr(args, "num_layers", None) is not None


def transformer_config(hf_config, parallel: ParallelSizes, *, dtype: torch.dtype = torch.float32,
                       recompute: Recompute = Recompute(), cpu_init: bool = False, fused_kernels: bool | None = None):
    """megatron-core TransformerConfig equivalent to the HF config.

    `fused_kernels`: masked-softmax / bias-activation / RoPE fusions (CUDA only); default: on when CUDA is
    available. `cpu_init`: create parameters on the CPU (weights are loaded right after, so no random init).
    """
    from megatron.core.transformer import TransformerConfig

    layout = convert.ModelLayout.from_hf_config(hf_config)
    fused = torch.cuda.is_available() if fused_kernels is None else fused_kernels
    return TransformerConfig(
        num_layers=layout.num_layers,
        hidden_size=layout.hidden_size,
        ffn_hidden_size=layout.ffn_hidden_size,
        num_attention_heads=layout.num_heads,
        num_query_groups=layout.num_kv_heads,
        kv_channels=layout.head_dim,
        normalization="RMSNorm",
        layernorm_epsilon=hf_config.rms_norm_eps,
        gated_linear_unit=True,  # SwiGLU: linear_fc1 = [gate; up]
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=False,
        qk_layernorm=layout.qk_layernorm,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tensor_model_parallel_size=parallel.tensor,
        pipeline_model_parallel_size=parallel.pipeline,
        context_parallel_size=parallel.context,
        sequence_parallel=parallel.sequence_parallel and parallel.tensor > 1,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        attention_softmax_in_fp32=True,
        masked_softmax_fusion=fused,
        bias_activation_fusion=fused,
        apply_rope_fusion=fused,
        gradient_accumulation_fusion=False,  # needs apex's fused_weight_gradient_mlp_cuda
        persist_layer_norm=False,
        use_cpu_initialization=cpu_init,
        perform_initialization=False,
        variable_seq_lengths=True,  # every micro-batch has its own length (pipeline p2p shapes follow it)
        moe_token_dispatcher_type="alltoall",  # dense models: only satisfies the check that goes with the line above
        recompute_granularity=recompute.granularity,
        recompute_method=recompute.method if recompute.granularity == "full" else None,
        recompute_num_layers=recompute.num_layers if recompute.granularity == "full" else None,
    )


def layer_spec(qk_layernorm: bool, impl: str | None = None):
    """Transformer Engine spec when available (or asked for), local spec otherwise."""
    from megatron.core.models.gpt.gpt_layer_specs import (get_gpt_layer_local_spec,
                                                            get_gpt_layer_with_transformer_engine_spec)

    use_te = transformer_engine_available() if impl in (None, "auto") else impl == "transformer_engine"
    if use_te:
        if not transformer_engine_available():
            raise ImportError("--transformer-impl transformer_engine needs the transformer_engine package")
        return get_gpt_layer_with_transformer_engine_spec(qk_layernorm=qk_layernorm)
    return get_gpt_layer_local_spec(qk_layernorm=qk_layernorm, normalization="RMSNorm")


def build_gpt_model(hf_config, parallel: ParallelSizes, *, dtype: torch.dtype = torch.float32,
                    recompute: Recompute = Recompute(), cpu_init: bool = False, impl: str | None = None,
                    vocab_divisor: int = convert.DEFAULT_VOCAB_DIVISOR, fused_kernels: bool | None = None):
    """The GPTModel of this pipeline stage (parallel_state must be initialised with the same sizes)."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel

    layout = convert.ModelLayout.from_hf_config(hf_config)
    padded_vocab = convert.padded_vocab_size(layout.vocab_size, parallel.tensor, vocab_divisor)
    convert.check_tp_size(layout, parallel.tensor, padded_vocab)
    config = transformer_config(hf_config, parallel, dtype=dtype, recompute=recompute, cpu_init=cpu_init,
                                fused_kernels=fused_kernels)
    return GPTModel(
        config=config,
        transformer_layer_spec=layer_spec(layout.qk_layernorm, impl),
        vocab_size=padded_vocab,
        max_sequence_length=hf_config.max_position_embeddings,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
        parallel_output=True,  # logits stay vocab-sharded; callers gather (or trim) them
        share_embeddings_and_output_weights=layout.tied_embeddings,
        position_embedding_type="rope",
        rotary_base=rope_theta(hf_config),
        rotary_percent=1.0,
    )


# ------------------------------------------------------------------------------------ weights in / out

def _layer_offset(model) -> int:
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    return get_transformer_layer_offset(model.config)


def _global_name(local_name: str, offset: int) -> str:
    """decoder.layers.{local}.x -> decoder.layers.{offset + local}.x (pipeline stages number layers from 0)."""
    if not local_name.startswith("decoder.layers."):
        return local_name
    index, rest = local_name[len("decoder.layers."):].split(".", 1)
    return f"decoder.layers.{int(index) + offset}.{rest}"


def _model_tensors(model) -> dict[str, torch.Tensor]:
    """Parameters and weight tensors of the model by state-dict name (no TE `_extra_state`)."""
    return {name: tensor for name, tensor in model.state_dict(keep_vars=True).items()
            if not name.endswith("_extra_state") and isinstance(tensor, torch.Tensor)}


def load_hf_state_dict(model, hf_state: dict[str, torch.Tensor], hf_config) -> None:
    """Copy a full HF state dict into this rank's GPTModel shard (any TP rank / PP stage)."""
    from megatron.core import parallel_state

    layout = convert.ModelLayout.from_hf_config(hf_config)
    tp_size = parallel_state.get_tensor_model_parallel_world_size()
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    full = convert.to_te_spec_names(convert.hf_to_megatron(hf_state, layout, padded_vocab=model.vocab_size))
    offset = _layer_offset(model)
    missing = []
    with torch.no_grad():
        for local_name, target in convert.to_te_spec_names(_model_tensors(model)).items():
            name = _global_name(local_name, offset)
            if name == "output_layer.weight" and name not in full:  # tied: last stage's copy of the embedding
                name = "embedding.word_embeddings.weight"
            if name not in full:
                missing.append(name)
                continue
            shard = convert.shard_tensor(name, full[name], tp_size, tp_rank)
            if shard.shape != target.shape:
                raise convert.ConversionError(f"{name}: converted shard {tuple(shard.shape)} does not fit the "
                                              f"model's {tuple(target.shape)}")
            target.copy_(shard)
    if missing:
        raise convert.ConversionError(f"no HF weight for model tensors {missing[:8]}")


def gather_hf_state_dict(model, hf_config) -> dict[str, torch.Tensor]:
    """The full HF state dict (CPU tensors) on global rank 0, an empty dict elsewhere. Collective over all ranks.

    TP shards are all-gathered within each TP group; the first TP rank of every pipeline stage then sends its
    stage to global rank 0 (object gather over the PP group), where Megatron -> HF conversion runs.
    """
    import torch.distributed as dist
    from megatron.core import parallel_state

    layout = convert.ModelLayout.from_hf_config(hf_config)
    tp_group = parallel_state.get_tensor_model_parallel_group()
    tp_size = parallel_state.get_tensor_model_parallel_world_size()
    offset = _layer_offset(model)
    stage: dict[str, torch.Tensor] = {}
    for local_name, tensor in convert.to_te_spec_names(_model_tensors(model)).items():
        name = _global_name(local_name, offset)
        if name == "output_layer.weight" and layout.tied_embeddings:
            continue  # the tied copy on the last stage
        data = tensor.detach()
        if convert.partition_kind(name) != "replicated" and tp_size > 1:
            shards = [torch.empty_like(data) for _ in range(tp_size)]
            dist.all_gather(shards, data.contiguous(), group=tp_group)
            data = convert.unshard_tensor(name, shards)
        stage[name] = data.cpu()
    first_tp = parallel_state.get_tensor_model_parallel_rank() == 0
    first_dp = parallel_state.get_data_parallel_rank(with_context_parallel=True) == 0
    if parallel_state.get_pipeline_model_parallel_world_size() > 1:
        stages = [None] * parallel_state.get_pipeline_model_parallel_world_size()
        if first_tp and first_dp:
            dist.all_gather_object(stages, stage, group=parallel_state.get_pipeline_model_parallel_group())
        merged = {k: v for part in stages if part for k, v in part.items()}
    else:
        merged = stage
    if dist.get_rank() != 0:
        return {}
    return convert.megatron_to_hf(merged, layout)
