"""Tensor parallelism (Megatron-style sharding with DTensor) for the HF decoder LMs the fsdp backend trains.

Every decoder block is split over the `tp` ranks the same way:

- attention: q/k/v projections column-parallel (each rank owns whole heads), o_proj row-parallel;
- MLP: gate/up column-parallel, down_proj row-parallel;
- between blocks the residual stream is replicated: the row-parallel layers all-reduce their outputs in
  the forward pass and the column-parallel layers all-reduce their input gradients in the backward pass;
- input embedding row-parallel over the vocabulary (masked lookup + all-reduce), `lm_head`
  column-parallel over the vocabulary with its output gathered: the losses receive ordinary full
  `[b, R, V]` logits, so `slime.utils.loss` and custom loss plugins work unchanged. When the two are
  tied (SmolLM2, the tiny Qwen3) both shard the weight on dim 0, so they keep sharing one parameter.

Families whose attention normalises each head with one shared weight (Qwen3's `q_norm`/`k_norm`) need
that weight's gradient summed over the tensor-parallel ranks, since each rank only sees its own heads;
the norm runs on a head-sharded DTensor with a replicated weight, and DTensor's autograd does the sum.

The HF config keeps the global sizes (it is what exports and checkpoints write). transformers >= 5
reshapes q/k/v with `-1` heads and uses only the (tp-invariant) heads-per-KV-group ratio, so the
attention modules need no local head counts; modules that do carry `num_heads`-style attributes get
their per-rank values (see `localise_head_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from slime.backends.fsdp.parallel import data_parallel_size


class TensorParallelError(ValueError):
    """A model, flag or layout that tensor parallelism cannot handle (raised before anything is sharded)."""


@dataclass(frozen=True)
class FamilyPlan:
    """Where a family keeps its modules (HF `*ForCausalLM` naming) and what needs special handling."""

    head_norms: tuple[str, ...] = ()  # per-head norms inside `self_attn` whose weight is shared by all heads


# HF `config.model_type` -> plan. Every family here has the Llama layout: model.embed_tokens,
# model.layers[i].self_attn.{q,k,v,o}_proj, model.layers[i].mlp.{gate,up,down}_proj, lm_head.
# Qwen2 adds q/k/v biases (sharded with their weights by ColwiseParallel); Qwen3 adds q_norm/k_norm.
FAMILIES: dict[str, FamilyPlan] = {
    "llama": FamilyPlan(),  # includes SmolLM2 (LlamaForCausalLM)
    "mistral": FamilyPlan(),
    "qwen2": FamilyPlan(),
    "qwen3": FamilyPlan(head_norms=("q_norm", "k_norm")),
}

COLUMN_PARALLEL = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
ROW_PARALLEL = ("self_attn.o_proj", "mlp.down_proj")


def family_plan(config) -> FamilyPlan:
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise TensorParallelError(
            f"--tensor-model-parallel-size > 1 is not supported for model type {model_type!r}; "
            f"supported families: {', '.join(sorted(FAMILIES))}. Use --tensor-model-parallel-size 1 "
            f"(FSDP2/DDP only) for this model.")
    return FAMILIES[model_type]


def check_tensor_parallel(config, tp_size: int, world_size: int, use_lora: bool = False) -> FamilyPlan:
    """Validate a TP layout against the model config before loading or sharding anything."""
    try:
        data_parallel_size(world_size, tp_size)
    except ValueError as exc:
        raise TensorParallelError(str(exc)) from None
    plan = family_plan(config)
    if use_lora:
        # PEFT wraps q_proj & co. in LoRA layers whose A/B matrices would need their own column/row split
        # (and a gathered LoRA output for row-parallel layers); none of that is implemented.
        raise TensorParallelError("--use-lora cannot be combined with --tensor-model-parallel-size > 1 "
                                  "(PEFT LoRA layers are not tensor-parallel); use LoRA with FSDP2/DDP only")
    sizes = {"num_attention_heads": config.num_attention_heads,
             "num_key_value_heads": getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
             "intermediate_size": config.intermediate_size}
    bad = [f"{name} = {value}" for name, value in sizes.items() if value % tp_size]
    if bad:
        raise TensorParallelError(f"--tensor-model-parallel-size {tp_size} must divide {', '.join(bad)} "
                                  f"({getattr(config, 'model_type', '?')} config): each rank owns whole heads "
                                  f"and an equal share of the MLP")
    return plan


def decoder_layers(model) -> list[torch.nn.Module]:
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not hasattr(model, "lm_head"):
        raise TensorParallelError(f"{type(model).__name__} does not have the model.layers / lm_head layout "
                                  f"the tensor-parallel plans expect")
    return list(layers)


def _head_sharded_input(module, inputs, mesh):
    # The projection output is this rank's heads: [..., local_heads, head_dim]; as a DTensor sharded on
    # the heads dim, the norm's (replicated) weight gets a partial gradient that DTensor sums over ranks.
    (hidden,) = inputs
    return (DTensor.from_local(hidden, mesh, [Shard(hidden.dim() - 2)], run_check=False),)


def _local_output(module, output, mesh):
    return output.to_local()


def localise_head_counts(attention: torch.nn.Module, tp_size: int) -> None:
    """Attention implementations that size their reshapes from module attributes must see per-rank values."""
    for name in ("num_heads", "num_key_value_heads"):
        value = getattr(attention, name, None)
        if isinstance(value, int):
            setattr(attention, name, value // tp_size)


def apply_tensor_parallel(model: torch.nn.Module, tp_mesh: DeviceMesh, plan: FamilyPlan) -> torch.nn.Module:
    """Shard `model` in place over the 1-D mesh `tp_mesh` (every rank must hold the same full weights)."""
    tp_size = tp_mesh.size()
    embed = model.get_input_embeddings()
    tied = model.lm_head.weight is embed.weight
    for layer in decoder_layers(model):
        styles = {name: ColwiseParallel() for name in COLUMN_PARALLEL}
        styles.update({name: RowwiseParallel() for name in ROW_PARALLEL})
        parallelize_module(layer, tp_mesh, styles)
        for norm_name in plan.head_norms:
            distribute_module(getattr(layer.self_attn, norm_name), tp_mesh, input_fn=_head_sharded_input,
                              output_fn=_local_output)
        localise_head_counts(layer.self_attn, tp_size)
    parallelize_module(model, tp_mesh, {
        "model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
        # gathered logits: the losses are plain functions of [b, R, V] (no loss_parallel needed)
        "lm_head": ColwiseParallel(output_layouts=Replicate()),
    })
    if tied:
        # each module got its own DTensor copy; both are Shard(0) over the vocabulary, so re-share one
        model.lm_head.weight = model.get_input_embeddings().weight
    return model


def tensor_parallel_mesh(device_type: str, world_size: int, tp_size: int) -> DeviceMesh:
    """The 2-D (dp, tp) mesh: ranks r = dp_rank * tp + tp_rank, so a TP group is consecutive ranks (one node)."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device_type, (world_size // tp_size, tp_size), mesh_dim_names=("dp", "tp"))
