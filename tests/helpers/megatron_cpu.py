"""Test-only shim that lets megatron-core 0.16.1 run its local (non-Transformer-Engine) GPT spec on CPU with gloo.

Not part of the library: on GPU machines none of this is needed. Each patch is the smallest change that
removes one hard-coded CUDA assumption met on the forward/backward path of GPTModel:

1. `torch.cuda.current_device` -> "cpu": RotaryEmbedding moves its `inv_freq` to `torch.cuda.current_device()`
   at the first forward (and a few buffers are allocated there). Returning "cpu" keeps them on the CPU.
2. `fused_softmax.get_default_causal_mask`: the torch (non-fused) softmax path builds its causal mask with
   `device="cuda"` hard-coded; the replacement builds the same mask on the CPU.
3. The RNG tracker: `get_cuda_rng_tracker().fork()` saves/restores the CUDA generator around attention
   dropout. The tracker megatron-core itself uses for inference (`inference_rng_tracker=True`) forks as a
   no-op; dropout is 0 in every test, so no randomness is involved either way.

Everything else (parallel_state groups, ColumnParallelLinear / RowParallelLinear / VocabParallelEmbedding
collectives, the optimizer, the distributed optimizer's buffers) runs unpatched over gloo.
"""

from __future__ import annotations

import contextlib
import functools

import torch

_ORIGINALS: dict = {}


@functools.lru_cache(maxsize=32)
def _cpu_causal_mask(sq: int) -> torch.Tensor:
    return torch.triu(torch.ones(sq, sq), diagonal=1).bool()


def install() -> None:
    """Apply the patches (idempotent). Call after `torch.distributed` and parallel_state are initialised."""
    if torch.cuda.is_available() or _ORIGINALS:
        return  # real GPUs: nothing to patch; or already installed
    from megatron.core.fusions import fused_softmax
    from megatron.core.tensor_parallel import random

    _ORIGINALS.update(current_device=torch.cuda.current_device, causal_mask=fused_softmax.get_default_causal_mask)
    torch.cuda.current_device = lambda: "cpu"  # patch 1
    fused_softmax.get_default_causal_mask = _cpu_causal_mask  # patch 2
    random.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)  # patch 3


def uninstall() -> None:
    """Undo `install` (in-process tests share the interpreter with the rest of the suite)."""
    if not _ORIGINALS:
        return
    from megatron.core.fusions import fused_softmax
    from megatron.core.tensor_parallel import random

    torch.cuda.current_device = _ORIGINALS.pop("current_device")
    fused_softmax.get_default_causal_mask = _ORIGINALS.pop("causal_mask")
    random.initialize_rng_tracker(force_reset=True)


def init_gloo_single_process() -> None:
    """A torch.distributed group of one (for in-process tests) on an in-memory store.

    No MASTER_PORT/RANK/WORLD_SIZE in os.environ: the rest of the suite shares this interpreter, and child
    processes it starts (trainers, torchrun) would inherit them and try to join or bind this group's port.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


@contextlib.contextmanager
def single_process_model_parallel(tensor_model_parallel_size: int = 1):
    """torch.distributed (gloo, one rank) + megatron parallel_state + the CPU shim, all undone after."""
    import torch.distributed as dist
    from megatron.core import parallel_state

    was_initialized = dist.is_initialized()
    init_gloo_single_process()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tensor_model_parallel_size)
    install()
    try:
        yield
    finally:
        uninstall()
        parallel_state.destroy_model_parallel()
        if not was_initialized:
            dist.destroy_process_group()
