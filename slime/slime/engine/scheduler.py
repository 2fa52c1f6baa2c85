"""The continuous-batching loop: one thread owns the model and runs prefill chunks and decode steps.

Every loop iteration admits waiting requests (up to `max_running`), prefills up to
`prefill_chunk_tokens` prompt tokens of admitted requests (a long prompt is split over several
iterations so the running batch keeps streaming), then runs one decode step for every running
sequence. Sequences join and leave the batch between steps. An image prompt (vision-language models) runs
the vision tower once when admitted (`images.prompt_inputs`); its chunks then pass embedding slices and
M-RoPE positions, and its cache row's next position carries its rope_delta, so it batches with text rows.

Weight swaps (`request_swap`) stop admission, let every admitted sequence finish on the old weights,
then switch model and version in one assignment before admitting again: requests queued meanwhile
just wait, none fails. HTTP handlers never touch the model; they submit `Sequence`s and are woken by
`on_update` callbacks (called from this thread).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

import torch

from slime.engine import model_runner
from slime.engine.detokenizer import IncrementalDetokenizer
from slime.engine.images import PromptImages, prompt_inputs
from slime.engine.kv_cache import BatchKVCache
from slime.engine.prefix_cache import PrefixCache
from slime.engine.sampling import SamplingConfig, draw, scaled_logprobs, top_logprobs, truncate

log = logging.getLogger(__name__)


class QueueFullError(RuntimeError):
    """The waiting queue is at capacity: the caller should answer 429/503 with Retry-After."""


@dataclass
class Sequence:
    """One generation: its inputs, its growing outputs, and how to tell the HTTP side about progress.

    Output lists are append-only and written only by the scheduler thread; readers use the counts
    passed to `on_update` so they never see a half-written step.
    """

    prompt_ids: list[int]
    sampling: SamplingConfig
    return_logprob: bool = False
    logprob_start_len: int = -1  # -1: no input log-probs
    top_logprobs_num: int = 0
    on_update: Callable[["Sequence", bool], None] | None = None
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    # a vision-language model's image prompt: its preprocessed images (pads in prompt_ids already expanded)
    # and the prefix-cache key of its prompt (prompt_ids with each image's pads replaced by a content hash)
    images: PromptImages | None = None
    image_key: list[int] | None = None

    output_ids: list[int] = field(default_factory=list)
    output_logprobs: list[float] = field(default_factory=list)
    output_top: list[list[tuple[float, int]]] = field(default_factory=list)
    input_logprobs: list[float | None] = field(default_factory=list)
    input_top: list[list[tuple[float, int]] | None] = field(default_factory=list)
    text: str = ""
    stable_text_len: int = 0  # text[:stable_text_len] can be streamed: no stop string can still trim it
    finish_reason: dict | None = None
    weight_version: str = ""
    cached_tokens: int = 0
    cancelled: bool = False
    cancel_reason: str = "cancelled by client"
    error: str | None = None  # set when the engine failed (as opposed to an abort someone asked for)

    # scheduler-private state
    _detok: IncrementalDetokenizer | None = None
    _generator: torch.Generator | None = None
    _cache: BatchKVCache | None = None
    _prefilled: int = 0
    _stop_checked: int = 0
    _embeds: torch.Tensor | None = None  # image prompts: embeddings with vision features, (1, L, H)
    _positions: torch.Tensor | None = None  # image prompts: M-RoPE positions, (3, 1, L)
    _rope_delta: int = 0

    @property
    def prefix_key(self) -> list[int]:
        """What the prefix cache knows this prompt by (its ids, unless it has images)."""
        return self.prompt_ids if self.image_key is None else self.image_key

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    @property
    def wants_input_logprobs(self) -> bool:
        return self.return_logprob and self.logprob_start_len >= 0


@dataclass
class SchedulerConfig:
    max_running: int = 32
    max_waiting: int = 256
    prefill_chunk_tokens: int = 512
    prefix_cache_tokens: int = 16384
    eos_token_ids: frozenset[int] = frozenset()
    seed: int = 0


@dataclass
class _Swap:
    model: object
    version: str
    future: Future
    abort_running: bool = False


class Scheduler:
    def __init__(self, model, tokenizer, config: SchedulerConfig, weight_version: str = "0"):
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.weight_version = weight_version
        self.prefix_cache = PrefixCache(config.prefix_cache_tokens)
        self.num_layers = model_runner.num_cache_layers(model)

        self._lock = threading.Condition()
        self._inbox: deque[Sequence] = deque()
        self._swap: _Swap | None = None
        self._flush_requested = False
        self._stop = False
        self._waiting: deque[Sequence] = deque()
        self._prefilling: deque[Sequence] = deque()
        self._running: list[Sequence] = []
        self._batch = BatchKVCache(self.num_layers)
        self._shared_generator = torch.Generator().manual_seed(config.seed)
        self._thread = threading.Thread(target=self._loop, name="engine-scheduler", daemon=True)
        self.stats = {"requests": 0, "generated_tokens": 0, "prompt_tokens": 0, "cached_tokens": 0, "decode_steps": 0}
        self.last_error: str | None = None

    # --- API used by the HTTP side (any thread) -------------------------------------------
    def start(self):
        self._thread.start()

    def stop(self):
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        self._thread.join(timeout=30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, sequences: list[Sequence]):
        """Queue sequences atomically (all or none); raises QueueFullError when there is no room."""
        with self._lock:
            queued = len(self._inbox) + len(self._waiting)
            if queued + len(sequences) > self.config.max_waiting:
                raise QueueFullError(
                    f"engine queue is full ({queued} waiting, limit {self.config.max_waiting}); retry later"
                )
            self._inbox.extend(sequences)
            self._lock.notify_all()

    def request_swap(self, model, version: str, abort_running: bool = False) -> Future:
        """Switch to `model` once the admitted sequences have finished; the future resolves after the switch.

        With `abort_running`, admitted sequences are ended with finish reason "abort" instead of waited
        for (SGLang's `abort_all_requests`: RL rollouts that must not straddle versions).
        """
        future: Future = Future()
        with self._lock:
            if self._swap is not None:
                future.set_exception(RuntimeError("another weight update is already in progress"))
                return future
            self._swap = _Swap(model, version, future, abort_running)
            self._lock.notify_all()
        return future

    def flush_cache(self):
        with self._lock:
            self._flush_requested = True
            self._lock.notify_all()

    def load(self) -> dict:
        with self._lock:
            return {
                "running": len(self._running),
                "prefilling": len(self._prefilling),
                "waiting": len(self._waiting) + len(self._inbox),
                "swap_pending": self._swap is not None,
            }

    # --- the loop ---------------------------------------------------------------------------
    def _loop(self):
        while True:
            with self._lock:
                while not self._stop and not self._has_work():
                    self._lock.wait(timeout=1.0)
                if self._stop:
                    break
                self._waiting.extend(self._inbox)
                self._inbox.clear()
                flush, self._flush_requested = self._flush_requested, False
            try:
                if flush:
                    self.prefix_cache.clear()
                self._maybe_swap()
                self._admit()
                if self._prefilling:
                    self._prefill_some()
                if self._running:
                    self._decode()
            except Exception as exc:  # a bug or OOM must fail the affected requests, not kill the engine
                log.exception("engine step failed")
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._fail_all_active(self.last_error)
        self._fail_all_active("engine shutting down", waiting_too=True)

    def _has_work(self) -> bool:
        return bool(
            self._inbox or self._waiting or self._prefilling or self._running or self._swap or self._flush_requested
        )

    def _maybe_swap(self):
        with self._lock:
            swap = self._swap
        if swap is None:
            return
        if swap.abort_running:
            for seq in list(self._prefilling) + self._running:
                seq.cancel_reason = "aborted for a weight update"
                seq.cancelled = True
        if self._prefilling or self._running:
            return
        self.model = swap.model
        self.weight_version = swap.version
        self.prefix_cache.clear()  # KV computed by the old weights must not serve the new version
        with self._lock:
            self._swap = None
        swap.future.set_result(swap.version)

    def _admit(self):
        if self._swap is not None:
            return  # drain: nothing new starts on weights about to be replaced
        while self._waiting and len(self._running) + len(self._prefilling) < self.config.max_running:
            seq = self._waiting.popleft()
            if seq.cancelled:
                self._finish(seq, {"type": "abort", "message": seq.cancel_reason})
                continue
            try:
                self._start(seq)
            except Exception as exc:  # fail this request alone, not the batch
                log.exception("could not start request %s", seq.rid)
                seq.error = f"{type(exc).__name__}: {exc}"
                self._finish(seq, {"type": "abort", "message": seq.error})

    def _start(self, seq: Sequence):
        seq.weight_version = self.weight_version
        seq._detok = IncrementalDetokenizer(self.tokenizer, seq.sampling.skip_special_tokens)
        if seq.sampling.seed is not None:
            # seed + i for n samples can leave the int64 range torch accepts; fold it back in
            seq._generator = torch.Generator().manual_seed(seq.sampling.seed % 2**63)
        # positions whose logits we need must be recomputed, so reuse stops before the first of them
        max_reuse = len(seq.prompt_ids) - 1
        if seq.wants_input_logprobs:
            max_reuse = min(max_reuse, max(seq.logprob_start_len - 1, 0))
        if seq.images is not None:
            # the vision tower runs once per request; prefill chunks then take slices of the embeddings
            seq._embeds, seq._positions, seq._rope_delta = prompt_inputs(self.model, seq.prompt_ids, seq.images)
        reused, cache = self.prefix_cache.lookup(seq.prefix_key, max_reuse)
        seq._cache = cache if cache is not None else BatchKVCache(self.num_layers)
        seq._prefilled = reused
        seq.cached_tokens = reused
        self.stats["requests"] += 1
        self.stats["prompt_tokens"] += len(seq.prompt_ids)
        self.stats["cached_tokens"] += reused
        self._prefilling.append(seq)

    def _prefill_some(self):
        budget = self.config.prefill_chunk_tokens
        while self._prefilling and budget > 0:
            seq = self._prefilling[0]
            if seq.cancelled:
                self._prefilling.popleft()
                seq._cache = seq._embeds = seq._positions = None
                self._finish(seq, {"type": "abort", "message": seq.cancel_reason})
                continue
            start = seq._prefilled
            end = min(len(seq.prompt_ids), start + budget)
            keep_from = len(seq.prompt_ids) - 1
            if seq.wants_input_logprobs:
                keep_from = min(keep_from, max(seq.logprob_start_len - 1, 0))
            if seq.images is None:
                logits = model_runner.prefill_chunk(
                    self.model, seq._cache, seq.prompt_ids[start:end], start, keep_from
                )
            else:
                logits = model_runner.prefill_chunk(
                    self.model, seq._cache, seq.prompt_ids[start:end], start, keep_from,
                    inputs_embeds=seq._embeds[:, start:end], positions=seq._positions[:, :, start:end],
                    rope_delta=seq._rope_delta,
                )
            self._record_prompt_logits(seq, logits, first_position=end - logits.shape[0])
            seq._prefilled = end
            budget -= end - start
            if end < len(seq.prompt_ids):
                continue  # the same sequence goes on next iteration (or now, if budget is left)
            self._prefilling.popleft()
            try:
                self._complete_prefill(seq, logits)
            except Exception as exc:
                # it has left the prefill queue but not joined the batch: nobody else would finish it
                seq.error = f"{type(exc).__name__}: {exc}"
                self._finish(seq, {"type": "abort", "message": seq.error})
                raise
            finally:
                seq._cache = seq._embeds = seq._positions = None

    def _complete_prefill(self, seq: Sequence, logits: torch.Tensor):
        """The whole prompt is in the cache: sample the first token and join the batch (or finish)."""
        if seq.sampling.max_new_tokens == 0:  # scoring only
            self._finish(seq, {"type": "length", "length": 0})
            self._retire_unbatched(seq)
            return
        token = self._sample(torch.stack([logits[-1]]), [seq])[0]
        if self._append_token(seq, token):
            self._retire_unbatched(seq)
        else:
            self._batch.append_rows(seq._cache)
            self._running.append(seq)

    def _record_prompt_logits(self, seq: Sequence, logits: torch.Tensor, first_position: int):
        """Turn prompt logits into log-probs of the *next* prompt token, position by position.

        Row j holds the logits at position p = first_position + j, i.e. the distribution of token p+1.
        input_logprobs[i] belongs to absolute position logprob_start_len + i; position 0 has none.
        """
        if not seq.wants_input_logprobs or logits.shape[0] == 0:
            return
        if seq.logprob_start_len == 0 and not seq.input_logprobs:
            seq.input_logprobs.append(None)
            seq.input_top.append(None)
        last = len(seq.prompt_ids) - 1
        rows = logits if first_position + logits.shape[0] - 1 < last else logits[:-1]  # last row predicts output
        rows = rows[max(0, seq.logprob_start_len - 1 - first_position) :]
        if rows.shape[0] == 0:
            return
        first_target = max(first_position, seq.logprob_start_len - 1) + 1
        targets = torch.tensor(seq.prompt_ids[first_target : first_target + rows.shape[0]], device=rows.device)
        temperature = torch.full((rows.shape[0],), seq.sampling.logprob_temperature)
        lp = scaled_logprobs(rows, temperature)
        seq.input_logprobs.extend(lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1).tolist())
        if seq.top_logprobs_num > 0:
            values, indices = top_logprobs(lp, seq.top_logprobs_num)
            seq.input_top.extend(list(zip(v, i)) for v, i in zip(values.tolist(), indices.tolist()))
        else:
            seq.input_top.extend([None] * rows.shape[0])

    def _decode(self):
        last = torch.tensor([seq.output_ids[-1] for seq in self._running])
        logits = model_runner.decode_step(self.model, self._batch, last)
        self.stats["decode_steps"] += 1
        tokens = self._sample(logits, self._running)
        keep = []
        for row, (seq, token) in enumerate(zip(self._running, tokens)):
            if seq.cancelled:
                self._finish(seq, {"type": "abort", "message": seq.cancel_reason})
            elif not self._append_token(seq, token):
                keep.append(row)
                continue
            self._remember_prefix(seq, row)
        if len(keep) < len(self._running):
            self._running = [self._running[r] for r in keep]
            self._batch.keep_rows(keep)

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> list[tuple[int, float, list | None]]:
        temps = torch.tensor([s.sampling.logprob_temperature for s in seqs])
        lp = scaled_logprobs(logits, temps)
        candidates = lp
        if any(s.sampling.truncates for s in seqs):
            candidates = truncate(
                lp,
                torch.tensor([s.sampling.top_k for s in seqs]),
                torch.tensor([s.sampling.top_p for s in seqs]),
                torch.tensor([s.sampling.min_p for s in seqs]),
            )
        greedy = torch.tensor([s.sampling.greedy for s in seqs])
        chosen = draw(candidates, greedy, [s._generator for s in seqs], self._shared_generator)
        chosen_lp = lp.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        k = max(s.top_logprobs_num if s.return_logprob else 0 for s in seqs)
        tops = None
        if k > 0:
            values, indices = top_logprobs(lp, k)
            tops = (values.tolist(), indices.tolist())
        chosen_ids, chosen_lps = chosen.tolist(), chosen_lp.tolist()  # one transfer, not one per row
        result = []
        for i, seq in enumerate(seqs):
            top = None
            if tops is not None and seq.return_logprob and seq.top_logprobs_num > 0:
                n = seq.top_logprobs_num
                top = list(zip(tops[0][i][:n], tops[1][i][:n]))
            result.append((int(chosen_ids[i]), float(chosen_lps[i]), top))
        return result

    def _append_token(self, seq: Sequence, sampled: tuple[int, float, list | None]) -> bool:
        """Record one sampled token; return True if the sequence is now finished."""
        token, logprob, top = sampled
        text_before = seq._detok.text
        seq.output_ids.append(token)
        seq.output_logprobs.append(logprob)
        if top is not None:
            seq.output_top.append(top)
        self.stats["generated_tokens"] += 1
        seq._detok.add(token)
        sp = seq.sampling
        reason = None
        if len(seq.output_ids) >= sp.min_new_tokens:
            if token in sp.stop_token_ids or (not sp.ignore_eos and token in self.config.eos_token_ids):
                reason = {"type": "stop", "matched": token}
        if reason is None and len(seq.output_ids) >= sp.max_new_tokens:
            seq._detok.flush()
            reason = {"type": "length", "length": len(seq.output_ids)}
        text = seq._detok.text
        if sp.stop and len(seq.output_ids) >= sp.min_new_tokens:
            longest = max(len(s) for s in sp.stop)
            window_start = max(0, seq._stop_checked - longest + 1)
            hit = _first_stop(text, sp.stop, window_start)
            if hit is not None:
                index, stop = hit
                text = text[: index + len(stop)] if sp.no_stop_trim else text[:index]
                reason = {"type": "stop", "matched": stop}
            seq._stop_checked = len(seq._detok.text)
        if reason is not None and reason["type"] == "stop" and isinstance(reason["matched"], int):
            # like SGLang: the stop token's own text is not part of the answer unless no_stop_trim
            if sp.no_stop_trim:
                seq._detok.flush()
                text = seq._detok.text
            else:
                text = text_before
        seq.text = text
        if reason is not None:
            seq.stable_text_len = len(text)
        else:
            # hold back a suffix that could still become a stop string and be trimmed
            hold = max((len(s) - 1 for s in sp.stop), default=0)
            seq.stable_text_len = max(seq.stable_text_len, len(text) - hold)
        if reason is not None:
            self._finish(seq, reason)
            return True
        if seq.cancelled:
            return False  # the decode loop aborts it after recording
        if seq.on_update is not None:
            seq.on_update(seq, False)
        return False

    def _remember_prefix(self, seq: Sequence, row: int):
        if not self.prefix_cache.enabled:
            return
        fed = seq.prefix_key + seq.output_ids[:-1]  # the last sampled token was never fed through the model
        self.prefix_cache.insert(fed, self._batch.extract_row(row))

    def _retire_unbatched(self, seq: Sequence):
        """A sequence that finished without joining the batch (scoring, or done on its first token):
        its single-row cache holds exactly the prompt, so it goes to the prefix cache as is."""
        if self.prefix_cache.enabled and seq._cache is not None:
            self.prefix_cache.insert(list(seq.prefix_key), seq._cache)

    def _finish(self, seq: Sequence, reason: dict):
        if seq.finished:
            return
        seq.finish_reason = reason
        seq.stable_text_len = len(seq.text)
        if seq.on_update is not None:
            seq.on_update(seq, True)

    def _fail_all_active(self, message: str, waiting_too: bool = False):
        doomed = list(self._prefilling) + list(self._running)
        if waiting_too:
            with self._lock:
                doomed += list(self._waiting) + list(self._inbox)
                self._waiting.clear()
                self._inbox.clear()
                swap, self._swap = self._swap, None
            if swap is not None:
                swap.future.set_exception(RuntimeError(message))
        self._prefilling.clear()
        self._running = []
        self._batch = BatchKVCache(self.num_layers)
        for seq in doomed:
            seq.error = message
            self._finish(seq, {"type": "abort", "message": message})


def _first_stop(text: str, stops: list[str], start: int) -> tuple[int, str] | None:
    best = None
    for stop in stops:
        index = text.find(stop, start)
        if index >= 0 and (best is None or index < best[0]):
            best = (index, stop)
    return best
