"""Forward passes of a Qwen2.5-VL policy on prompts with images: positions, target log-probs, generation.

Qwen2.5-VL places tokens with M-RoPE: three position rows (temporal, height, width). Text tokens have the
same value in all three; an image's tokens take its grid coordinates, and the text after an image resumes
at (the image's start + its larger merged side), so a sequence's last position is `len - 1 + rope_delta`
with `rope_delta <= 0` fixed by its images. Two traps in transformers 5.x make us pass `position_ids`
explicitly instead of letting the model infer them:

- the model builds 3D positions only when it is also given `mm_token_type_ids`; with only `pixel_values`
  and `image_grid_thw` it silently falls back to plain 1D positions (a different model than the one Qwen
  trained, and different from what SGLang/vLLM compute);
- during cached decoding it reads `rope_deltas` from an attribute on the model (`model.model.rope_deltas`),
  the last prefill's value: one shared slot, wrong as soon as two requests with different images share the
  model (an engine's batch) or a trainer forward runs in between.

So: prefill positions come from :func:`mrope_positions` (the model's own `get_rope_index`, stateless), and
every later token of a request is at `cache_length + i + rope_delta` on all three rows
(:func:`decode_positions`). The embedded engine keeps this per row by folding `rope_delta` into its cache row's next
position (`slime.engine.model_runner`); the trainer takes prefill positions from :func:`mrope_positions`. The
forward, log-prob and generate functions here are the reference the tests check both against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch


def _as_tensor(x, dtype) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x), dtype=dtype)


def _batched_ids(input_ids, device) -> torch.Tensor:
    ids = _as_tensor(input_ids, torch.long).to(device)
    return ids.unsqueeze(0) if ids.dim() == 1 else ids


def mrope_positions(model, input_ids: torch.Tensor, image_grid_thw=None,
                    attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """3D positions `(3, B, L)` and per-row `rope_delta` `(B,)` of prompts whose image pads are expanded.

    `image_grid_thw` lists the images of all rows in order. Padding (attention_mask 0, left or right) gets
    position 0 and does not count. Without images this is the 1D arange on all rows with delta 0."""
    config = model.config
    ids = _batched_ids(input_ids, model.device)
    if image_grid_thw is None or len(image_grid_thw) == 0:
        if attention_mask is None:
            pos = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)
        else:
            pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0).to(ids.device)
        return pos.unsqueeze(0).expand(3, -1, -1), torch.zeros(ids.shape[0], dtype=torch.long)
    # text 0, image 1 (what get_rope_index groups by)
    token_type = (ids == config.image_token_id).int()
    grid = _as_tensor(image_grid_thw, torch.long).to(ids.device)
    mask = None if attention_mask is None else attention_mask.to(ids.device)
    positions, deltas = _inner(model).get_rope_index(ids, mm_token_type_ids=token_type, image_grid_thw=grid,
                                                     attention_mask=mask)
    return positions, deltas.view(-1).cpu()


def decode_positions(cache_lengths, rope_deltas, num_tokens: int = 1) -> torch.Tensor:
    """Positions `(3, B, num_tokens)` of the next text tokens of rows whose caches hold `cache_lengths` real
    tokens: text after the last image advances by one per token on every row of M-RoPE."""
    base = _as_tensor(cache_lengths, torch.long).view(-1, 1) + _as_tensor(rope_deltas, torch.long).view(-1, 1)
    pos = base + torch.arange(num_tokens).view(1, -1)
    return pos.unsqueeze(0).expand(3, -1, -1)


def _inner(model):
    """The Qwen2_5_VLModel under a ForConditionalGeneration (and under a PEFT wrapper)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model


def forward_logits(model, input_ids, pixel_values=None, image_grid_thw=None,
                   attention_mask: torch.Tensor | None = None, logits_to_keep: int | torch.Tensor = 0):
    """One full forward (no cache) with explicit M-RoPE positions: logits `(B, L or kept, V)`.

    pixel_values/image_grid_thw: the images of all rows, concatenated in order (slime.models.vision)."""
    ids = _batched_ids(input_ids, model.device)
    positions, _ = mrope_positions(model, ids, image_grid_thw, attention_mask)
    kwargs = {}
    if pixel_values is not None:
        kwargs["pixel_values"] = _as_tensor(pixel_values, torch.float32).to(model.device, model.dtype)
        kwargs["image_grid_thw"] = _as_tensor(image_grid_thw, torch.long).to(model.device)
    out = model(input_ids=ids, attention_mask=None if attention_mask is None else attention_mask.to(model.device),
                position_ids=positions, use_cache=False, logits_to_keep=logits_to_keep, **kwargs)
    return out.logits


def target_log_probs(model, input_ids: Sequence[int], start: int, pixel_values=None, image_grid_thw=None,
                     temperature: float = 1.0) -> torch.Tensor:
    """Log-probs `(len - start,)` of tokens input_ids[start:] given everything before them (one row).

    What the trainer needs for a response after a prompt of length `start` (image pads expanded). Keeps the
    graph: call under torch.no_grad() for old/ref log-probs, without it for the loss. temperature scales the
    logits as the rollout did (0 or 1: unscaled)."""
    ids = _batched_ids(input_ids, model.device)
    if not 0 < start < ids.shape[1]:
        raise ValueError(f"start {start} must leave a prefix and a target in {ids.shape[1]} tokens")
    # logits of positions start-1 .. L-2 predict tokens start .. L-1; only those reach the LM head
    keep = torch.arange(start - 1, ids.shape[1] - 1, device=ids.device)
    logits = forward_logits(model, ids, pixel_values, image_grid_thw, logits_to_keep=keep)[0].float()
    if temperature > 0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[0, start:, None]).squeeze(-1)


@dataclass
class Generation:
    tokens: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)  # of the temperature-scaled distribution (SGLang's)
    rope_delta: int = 0  # what an engine keeps per request to continue this sequence from its cache
    finish_reason: str = "length"


@torch.inference_mode()
def generate(model, prompt_ids: Sequence[int], pixel_values=None, image_grid_thw=None, *, max_new_tokens: int = 16,
             temperature: float = 0.0, eos_token_ids: Sequence[int] = (), generator: torch.Generator | None = None
             ) -> Generation:
    """Greedy (temperature 0) or sampled decoding of one prompt with a KV cache.

    The reference loop for the engine: prefill runs the vision tower once, with mrope_positions; every
    decode step feeds one token at decode_positions(cache length, rope_delta), never touching the model's
    own rope_deltas slot. Log-probs follow SGLang: temperature-scaled, temperature 0 reported at 1."""
    from transformers import DynamicCache

    ids = _batched_ids(prompt_ids, model.device)
    positions, deltas = mrope_positions(model, ids, image_grid_thw)
    kwargs = {}
    if pixel_values is not None:
        kwargs["pixel_values"] = _as_tensor(pixel_values, torch.float32).to(model.device, model.dtype)
        kwargs["image_grid_thw"] = _as_tensor(image_grid_thw, torch.long).to(model.device)
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=1, **kwargs)
    result = Generation(rope_delta=int(deltas[0]))
    stop = set(int(t) for t in eos_token_ids)
    length = ids.shape[1]
    for step in range(max_new_tokens):
        logits = out.logits[0, -1].float()
        if temperature > 0:
            log_probs = torch.log_softmax(logits / temperature, dim=-1)
            token = int(torch.multinomial(log_probs.exp().cpu(), 1, generator=generator))
        else:
            log_probs = torch.log_softmax(logits, dim=-1)
            token = int(log_probs.argmax())
        result.tokens.append(token)
        result.log_probs.append(float(log_probs[token]))
        if token in stop:
            result.finish_reason = "stop"
            break
        if step == max_new_tokens - 1:
            break
        out = model(input_ids=torch.tensor([[token]], device=model.device),
                    position_ids=decode_positions([length], [result.rope_delta]).to(model.device),
                    cache=cache, use_cache=True)
        length += 1
    return result
