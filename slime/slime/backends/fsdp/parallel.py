"""Process group set-up and the small collectives the trainer needs (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str = "auto") -> DistInfo:
    """Join the torchrun group (or make a group of one when started as a plain process)."""
    use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
    if "RANK" not in os.environ:  # plain `python slime/train.py ...`: a group of one
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        if "MASTER_PORT" not in os.environ:
            from slime.engine.launch import free_port

            os.environ["MASTER_PORT"] = str(free_port())
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank,
                    torch.device("cuda", local_rank) if use_cuda else torch.device("cpu"))


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.get_world_size() > 1:
        dist.all_reduce(t)
    return t.tolist()


def all_reduce_max(value: int, device: torch.device) -> int:
    t = torch.tensor([value], dtype=torch.long, device=device)
    if dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


def broadcast_object(obj, src: int = 0):
    """Send a picklable object from `src` to every rank (rollout data, stop flags, versions)."""
    holder = [obj]
    if dist.get_world_size() > 1:
        dist.broadcast_object_list(holder, src=src)
    return holder[0]


def barrier():
    if dist.get_world_size() > 1:
        dist.barrier()
