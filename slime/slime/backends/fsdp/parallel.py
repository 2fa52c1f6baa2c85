"""Process group set-up and the small collectives the trainer needs (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

import atexit
import datetime
import os
import sys
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


def init_distributed(device: str = "auto", timeout_minutes: float | None = None) -> DistInfo:
    """Join the torchrun group (or make a group of one when started as a plain process).

    `timeout_minutes`: how long a collective may wait (None: torch's default), e.g. for engines to load.
    """
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
        timeout = datetime.timedelta(minutes=timeout_minutes) if timeout_minutes else None
        dist.init_process_group("nccl" if use_cuda else "gloo", timeout=timeout)
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank,
                    torch.device("cuda", local_rank) if use_cuda else torch.device("cpu"))


def data_parallel_size(world_size: int, tensor_parallel_size: int | None) -> int:
    """Training ranks / tensor-parallel size: how many different shares of each global batch exist.

    Ranks of one tensor-parallel group hold different slices of the same weights and must see the
    same micro-batches, so batches are split over data-parallel ranks only.
    """
    tp = 1 if tensor_parallel_size is None else tensor_parallel_size
    if tp < 1:
        raise ValueError(f"--tensor-model-parallel-size must be >= 1, got {tp}")
    if world_size % tp:
        raise ValueError(f"--tensor-model-parallel-size {tp} does not divide the {world_size} training ranks "
                         f"(torchrun --nnodes x --nproc-per-node)")
    return world_size // tp


def all_reduce_sum(values: list[float], device: torch.device, group=None) -> list[float]:
    """Sum over `group` (default: every rank)."""
    t = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.get_world_size(group) > 1:
        dist.all_reduce(t, group=group)
    return t.tolist()


def all_reduce_max(value: int, device: torch.device, group=None) -> int:
    t = torch.tensor([value], dtype=torch.long, device=device)
    if dist.get_world_size(group) > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
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


def leave_together() -> None:
    """End of a worker: wait for every rank, then tear the group down. A rank that exits while the group's gloo
    threads are still alive can abort ("terminate called without an active exception") after its work was done."""
    if dist.is_initialized():
        barrier()
        dist.destroy_process_group()


def exit_worker(code: int) -> None:
    """Leave a finished training process without the interpreter's teardown.

    The process group is destroyed by then (leave_together), yet the model's DDP reducer still holds the gloo group,
    and destroying it during interpreter finalization sometimes aborts the process ("terminate called without an
    active exception", SIGABRT) after every step, checkpoint and log was written: torchrun then reports the whole run
    failed. So the Python-level exit work runs here (atexit handlers: sandboxes, environment services, logging),
    the standard streams are flushed, and the process ends with `code` without C++ teardown."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can be written to it anyway
            pass
    os._exit(code)
