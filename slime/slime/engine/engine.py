"""The engine object the HTTP routes share: model, tokenizer, scheduler, and the async bridge to them."""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from pathlib import Path


from slime.engine.images import VisionSupport, is_vision_model
from slime.engine.protocol import APIError
from slime.engine.scheduler import QueueFullError, Scheduler, SchedulerConfig, Sequence
from slime.engine.weights import load_model, load_update
from slime.models.chat_template import render_prompt_ids

log = logging.getLogger(__name__)


@dataclass
class EngineConfig:
    model_path: str
    served_model_name: str | None = None
    dtype: str = "float32"
    device: str = "cpu"
    context_length: int | None = None
    max_running_requests: int = 32
    max_queued_requests: int = 256
    chunked_prefill_size: int = 512
    prefix_cache_tokens: int = 16384
    weight_version: str = "0"
    random_seed: int = 0
    api_key: str | None = None
    reasoning_parser: str | None = None  # "qwen3": split <think>...</think> into reasoning_content


class Engine:
    def __init__(self, config: EngineConfig):
        from transformers import AutoTokenizer

        self.config = config
        self.model_path = str(Path(config.model_path).resolve())
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        model = load_model(self.model_path, config.dtype, config.device)
        text_config = model.config.get_text_config()
        self.context_length = config.context_length or getattr(text_config, "max_position_embeddings", 4096)
        self.vocab_size = text_config.vocab_size
        self.served_model_name = config.served_model_name or Path(self.model_path).name
        # images in requests: Qwen2.5-VL-architecture models only (None: text-only, image inputs are refused)
        self.vision: VisionSupport | None = VisionSupport(model, self.model_path) if is_vision_model(model) else None
        self.scheduler = Scheduler(
            model,
            self.tokenizer,
            SchedulerConfig(
                max_running=config.max_running_requests,
                max_waiting=config.max_queued_requests,
                prefill_chunk_tokens=config.chunked_prefill_size,
                prefix_cache_tokens=config.prefix_cache_tokens,
                eos_token_ids=frozenset(_eos_ids(model, self.tokenizer)),
                seed=config.random_seed,
            ),
            weight_version=str(config.weight_version),
        )
        self.update_lock = asyncio.Lock()

    def start(self):
        self.scheduler.start()

    def stop(self):
        self.scheduler.stop()

    @property
    def weight_version(self) -> str:
        return self.scheduler.weight_version

    # --- tokenisation ---------------------------------------------------------------------
    def encode_text(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def render_chat(self, messages: list[dict], tools: list[dict] | None, template_kwargs: dict | None) -> list[int]:
        try:
            return render_prompt_ids(self.tokenizer, messages, tools, template_kwargs)
        except ValueError as exc:
            param = "tools" if "cannot render tools" in str(exc) else "messages"
            raise APIError(400, str(exc), param=param) from None

    def require_vision(self, param: str) -> VisionSupport:
        if self.vision is None:
            raise APIError(400, f"{param}: this model takes text only (no vision tower); images are not supported",
                           param=param)
        return self.vision

    @functools.lru_cache(maxsize=65536)
    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id])

    def check_prompt(self, ids: list[int], param: str = "input_ids") -> None:
        if not ids:
            raise APIError(400, "the prompt is empty", param=param)
        bad = next((t for t in ids if not 0 <= t < self.vocab_size), None)
        if bad is not None:
            raise APIError(400, f"token id {bad} is outside the vocabulary (size {self.vocab_size})", param=param)
        if len(ids) >= self.context_length:
            raise APIError(
                400,
                f"the prompt is {len(ids)} tokens; this model's context is {self.context_length} tokens "
                "and at least one must be left for the response",
                param=param,
            )

    def room_for(self, prompt_len: int) -> int:
        return self.context_length - prompt_len

    # --- running sequences ------------------------------------------------------------------
    def stream(self, sequences: list[Sequence]) -> "SequenceUpdates":
        """Submit sequences now (a full queue raises 429 here) and return an async iterator of progress."""
        return SequenceUpdates(self.scheduler, sequences)

    async def run(self, sequences: list[Sequence]) -> None:
        """Run to completion; raise 500 if the engine failed on any of them.

        A requested abort (weight update with abort_all_requests) is not an error: the partial output
        comes back with finish_reason "abort", as SGLang does, so RL rollouts can mark it ABORTED.
        """
        async for _ in self.stream(sequences):
            pass
        raise_if_failed(sequences)

    async def update_weights(self, model_path: str, version: str | None, abort_running: bool) -> str:
        async with self.update_lock:
            current = self.scheduler.model
            new_model = await asyncio.to_thread(
                load_update, model_path, self.model_path, current, self.config.dtype, self.config.device
            )
            if version is None:
                version = _next_version(self.weight_version)
            future = self.scheduler.request_swap(new_model, str(version), abort_running=abort_running)
            return await asyncio.wrap_future(future)


def raise_if_failed(sequences: list[Sequence]) -> None:
    for seq in sequences:
        if seq.error is not None:
            raise APIError(500, f"generation failed: {seq.error}", type="server_error")


class SequenceUpdates:
    """Yields (index, finished) each time one of the submitted sequences progresses.

    If the consumer stops early (client gone), every unfinished sequence is cancelled so the
    scheduler frees its batch slot at the next step.
    """

    def __init__(self, scheduler: Scheduler, sequences: list[Sequence]):
        self.sequences = sequences
        loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[int, bool]] = asyncio.Queue()
        for index, seq in enumerate(sequences):
            seq.on_update = functools.partial(_post, loop, self._queue, index)
        limit = scheduler.config.max_waiting
        if len(sequences) > limit:  # would be refused forever: not a "retry later"
            raise APIError(400, f"the request asks for {len(sequences)} sequences (prompts x n); "
                                f"this engine queues at most {limit}")
        try:
            scheduler.submit(sequences)
        except QueueFullError as exc:
            raise APIError(429, str(exc), type="server_overloaded", headers={"Retry-After": "1"}) from None

    def __aiter__(self):
        return self._updates()

    async def _updates(self):
        remaining = len(self.sequences)
        try:
            while remaining:
                index, finished = await self._queue.get()
                if finished:
                    remaining -= 1
                yield index, finished
        finally:
            self.cancel()

    def cancel(self):
        for seq in self.sequences:
            if not seq.finished:
                seq.cancelled = True


def _post(loop, queue: asyncio.Queue, index: int, seq: Sequence, finished: bool):
    # called from the scheduler thread; asyncio queues are not thread-safe
    loop.call_soon_threadsafe(queue.put_nowait, (index, finished))


def _next_version(version: str) -> str:
    return str(int(version) + 1) if version.isdigit() else f"{version}+1"


def _eos_ids(model, tokenizer) -> set[int]:
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, (list, tuple)):
            ids.update(int(e) for e in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids

