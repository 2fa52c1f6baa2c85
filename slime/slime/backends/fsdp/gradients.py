"""Gradient reductions for tensor-parallel training, where parameters are a mix of DTensors and tensors.

`torch.nn.utils.clip_grad_norm_` needs all gradients to be plain tensors or all DTensors on one mesh;
under tensor parallelism (alone, or 2-D with FSDP2) they are DTensors on the tp mesh, on the (dp, tp)
mesh and on the dp mesh, next to plain tensors. Here the squared norm of every gradient's local shard
is summed over exactly the ranks that hold the other shards of that gradient.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


def _local(grad: torch.Tensor) -> torch.Tensor:
    return grad.to_local() if isinstance(grad, DTensor) else grad


def _shard_groups(grad: torch.Tensor) -> tuple:
    """Process groups over which `grad` is split (replicated mesh dims hold copies and count once).

    A split is `Shard` or FSDP2's `_StridedShard` (dp sharding of an already tp-sharded dim), which
    does not report `is_shard()`; hence "neither replicated nor partial".
    """
    if not isinstance(grad, DTensor):
        return ()
    if any(placement.is_partial() for placement in grad.placements):
        raise RuntimeError("gradient norm of a Partial DTensor gradient: reduce it first "
                           "(complete_partial_gradients)")
    mesh = grad.device_mesh
    return tuple(mesh.get_group(dim) for dim, placement in enumerate(grad.placements)
                 if not placement.is_replicate())


@torch.no_grad()
def complete_partial_gradients(params: list[torch.Tensor]) -> None:
    """Turn pending partial sums into the parameter's own layout (one all-reduce each).

    A replicated weight applied to sharded activations (Qwen3's per-head q_norm/k_norm under TP) gets a
    `Partial` gradient: each rank holds its heads' share. FSDP2 sums these itself; without FSDP2 it is
    done here, before the optimizer and the norm see the gradient.
    """
    for param in params:
        grad = param.grad
        if isinstance(grad, DTensor) and isinstance(param, DTensor) and grad.placements != param.placements:
            param.grad = grad.redistribute(placements=param.placements)


@torch.no_grad()
def clip_grad_norm(params: list[torch.Tensor], max_norm: float | None) -> float:
    """Scale gradients so their global L2 norm is at most `max_norm` (None/0: no clipping); returns the norm."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    by_groups: dict[tuple, torch.Tensor] = {}
    for grad in grads:
        key = _shard_groups(grad)
        square = _local(grad).detach().float().pow(2).sum()
        by_groups[key] = by_groups[key] + square if key in by_groups else square
    total = 0.0
    for groups, square in by_groups.items():
        for group in groups:  # sum over a 2-D grid = sum over one dim of sums over the other
            dist.all_reduce(square, group=group)
        total += float(square)
    norm = math.sqrt(total)
    if max_norm and norm > max_norm:
        coef = max_norm / (norm + 1e-6)
        for grad in grads:
            _local(grad).mul_(coef)
    return norm


@torch.no_grad()
def average_gradients(params: list[torch.Tensor], group) -> None:
    """DDP's reduction done by hand over the data-parallel group (one flat all-reduce per dtype).

    Used for DDP + tensor parallel: DDP itself cannot wrap a module whose parameters are DTensors.
    """
    size = dist.get_world_size(group)
    if size == 1:
        return
    locals_by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for param in params:
        if param.grad is not None:
            local = _local(param.grad)
            locals_by_dtype.setdefault(local.dtype, []).append(local)
    for tensors in locals_by_dtype.values():
        flat = torch.cat([t.reshape(-1) for t in tensors])
        dist.all_reduce(flat, group=group)
        flat.div_(size)
        offset = 0
        for t in tensors:
            t.copy_(flat[offset : offset + t.numel()].view_as(t))
            offset += t.numel()
