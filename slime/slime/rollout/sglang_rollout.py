"""Upstream slime's `slime.rollout.sglang_rollout`, the module OpenClaw-RL's generate functions import: their
`GenerateState(args)` (tokenizer, processor, sampling parameters, the bound on requests in flight) and the default
rollout under upstream's names. The rollout itself is `slime.rollout.default_rollout`'s; this module only gives it
the names and call shapes a ported method folder expects (PORTING.md at the top of the repository).

A ported generate function reaches the policy's engines at `http://{args.sglang_router_ip}:{args.sglang_router_port}`
(the trainer sets both from its engines: the router, or the first engine) with `slime.utils.http_utils.post`, and
folds the engine's answer in with `sample.update_from_meta_info(args, meta_info)`."""

from __future__ import annotations

import asyncio
from typing import Any

from slime.rollout.default_rollout import (eval_rollout_async, generate, generate_and_rm, generate_and_rm_group,
                                           generate_rollout, run_coroutine, sampling_params_from_args,
                                           total_concurrency)
from slime.utils.misc import SingletonMeta
from slime.utils.processing_utils import load_processor, load_tokenizer


class GenerateState(metaclass=SingletonMeta):
    """The process's generation state, built once from `args` (later `GenerateState(args)` calls return it)."""

    def __init__(self, args) -> None:
        self.args = args
        self.tokenizer = load_tokenizer(args.hf_checkpoint)
        self.processor = load_processor(args.hf_checkpoint)
        self.concurrency = total_concurrency(args)
        self.sampling_params: dict[str, Any] = sampling_params_from_args(args)
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self.reset()

    @property
    def semaphore(self) -> asyncio.Semaphore:
        """The bound on requests in flight, one per event loop: every rollout here runs in a loop of its own, and
        an asyncio semaphore belongs to the loop that first waits on it."""
        loop = asyncio.get_running_loop()
        if loop not in self._semaphores:
            self._semaphores = {k: v for k, v in self._semaphores.items() if not k.is_closed()}
            self._semaphores[loop] = asyncio.Semaphore(self.concurrency)
        return self._semaphores[loop]

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: set = set()
        self.aborted = False


def eval_rollout(args, rollout_id: int):
    """Upstream's evaluation entry point: every `--eval-prompt-data` set, scored (`RolloutFnEvalOutput`)."""
    return run_coroutine(eval_rollout_async(args, rollout_id))


__all__ = ["GenerateState", "eval_rollout", "generate", "generate_and_rm", "generate_and_rm_group",
           "generate_rollout"]
