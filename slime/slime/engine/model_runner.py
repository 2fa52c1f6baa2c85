"""Forward passes of a transformers causal LM over a `BatchKVCache`: prefill chunks and decode steps."""

from __future__ import annotations

import torch

from slime.engine.kv_cache import BatchKVCache


def num_cache_layers(model) -> int:
    return model.config.get_text_config().num_hidden_layers


@torch.inference_mode()
def prefill_chunk(model, cache: BatchKVCache, token_ids: list[int], start: int, keep_from: int) -> torch.Tensor:
    """Run positions [start, start + len(token_ids)) of a single-row cache.

    Returns the logits of positions [max(start, keep_from), end) (possibly zero rows): only those
    positions are pushed through the LM head, which for long prompts is most of the cost saved.
    """
    end = start + len(token_ids)
    keep = end - max(start, keep_from)
    positions = torch.arange(start, end, device=model.device)
    out = model(
        input_ids=torch.tensor([token_ids], device=model.device),
        position_ids=positions.unsqueeze(0),
        cache_position=positions,
        past_key_values=cache,
        use_cache=True,
        # transformers treats 0 as "keep all", so ask for one row and drop it when nothing is needed
        logits_to_keep=max(keep, 1),
    )
    previous = cache.mask if cache.batch_size == 1 else torch.zeros((1, 0), dtype=torch.long)
    cache.mask = torch.cat([previous, torch.ones((1, len(token_ids)), dtype=torch.long)], dim=1)
    cache.next_pos = torch.tensor([end], dtype=torch.long)
    logits = out.logits[0]
    return logits[-keep:] if keep > 0 else logits[:0]


@torch.inference_mode()
def decode_step(model, cache: BatchKVCache, last_tokens: torch.Tensor) -> torch.Tensor:
    """Feed one token per row (left-padded batch); return next-token logits [B, V]."""
    mask = torch.cat([cache.mask, torch.ones((cache.batch_size, 1), dtype=torch.long)], dim=1)
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
