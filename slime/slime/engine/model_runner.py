"""Forward passes of a transformers causal LM over a `BatchKVCache`: prefill chunks and decode steps.

Vision-language models (Qwen2.5-VL architecture, `images.is_vision_model`) take explicit M-RoPE positions
`(3, B, L)`: an image prompt's prefill passes its precomputed embeddings (vision features already in place)
and positions, and a row's `next_pos` then holds `tokens so far + rope_delta`, the position of its next
token on all three rows. Text rows have rope_delta 0, so for them this is the text model's arithmetic.
"""

from __future__ import annotations

import torch

from slime.engine.images import is_vision_model
from slime.engine.kv_cache import BatchKVCache


def num_cache_layers(model) -> int:
    return model.config.get_text_config().num_hidden_layers


@torch.inference_mode()
def prefill_chunk(model, cache: BatchKVCache, token_ids: list[int], start: int, keep_from: int,
                  inputs_embeds: torch.Tensor | None = None, positions: torch.Tensor | None = None,
                  rope_delta: int = 0) -> torch.Tensor:
    """Run positions [start, start + len(token_ids)) of a single-row cache.

    Returns the logits of positions [max(start, keep_from), end) (possibly zero rows): only those
    positions are pushed through the LM head, which for long prompts is most of the cost saved.
    For an image prompt, `inputs_embeds` (1, len, H) and `positions` (3, 1, len) are this chunk's slices
    of `images.prompt_inputs`, and `rope_delta` the prompt's (its continuation's position offset).
    """
    end = start + len(token_ids)
    keep = end - max(start, keep_from)
    # transformers treats 0 as "keep all", so ask for one row and drop it when nothing is needed
    if is_vision_model(model):
        if positions is None:
            positions = torch.arange(start, end).view(1, 1, -1).expand(3, 1, -1)
        inputs = {"inputs_embeds": inputs_embeds} if inputs_embeds is not None else \
            {"input_ids": torch.tensor([token_ids], device=model.device)}
        out = model(**inputs, position_ids=positions.to(model.device), cache=cache, use_cache=True,
                    logits_to_keep=max(keep, 1))
    else:
        positions = torch.arange(start, end, device=model.device)
        out = model(
            input_ids=torch.tensor([token_ids], device=model.device),
            position_ids=positions.unsqueeze(0),
            cache_position=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=max(keep, 1),
        )
    previous = cache.mask if cache.batch_size == 1 else torch.zeros((1, 0), dtype=torch.long)
    cache.mask = torch.cat([previous, torch.ones((1, len(token_ids)), dtype=torch.long)], dim=1)
    cache.next_pos = torch.tensor([end + rope_delta], dtype=torch.long)
    logits = out.logits[0]
    return logits[-keep:] if keep > 0 else logits[:0]


@torch.inference_mode()
def decode_step(model, cache: BatchKVCache, last_tokens: torch.Tensor) -> torch.Tensor:
    """Feed one token per row (left-padded batch); return next-token logits [B, V]."""
    mask = torch.cat([cache.mask, torch.ones((cache.batch_size, 1), dtype=torch.long)], dim=1)
    if is_vision_model(model):
        # every row's next token is text: the same position on the three M-RoPE rows
        out = model(
            input_ids=last_tokens.unsqueeze(1).to(model.device),
            attention_mask=mask.to(model.device),
            position_ids=cache.next_pos.view(1, -1, 1).expand(3, -1, -1).to(model.device),
            cache=cache,
            use_cache=True,
        )
    else:
        out = model(
            input_ids=last_tokens.unsqueeze(1).to(model.device),
            attention_mask=mask.to(model.device),
            position_ids=cache.next_pos.unsqueeze(1).to(model.device),
            cache_position=torch.tensor([cache.seq_len], device=model.device),
            past_key_values=cache,
            use_cache=True,
        )
    cache.mask = mask
    cache.next_pos = cache.next_pos + 1
    return out.logits[:, -1]
