"""`get_log_probs_and_entropy` at upstream's import path, on upstream's packed layout: `logits` `[1, T, V]` holding
the samples one after another (sample i spans `total_lengths[i]` positions), the logit at a position predicting the
next token, and each sample's response the last `response_lengths[i]` tokens of `unconcat_tokens[i]`. A custom
loss run with `--custom-loss-batch-layout upstream` gets its batch and logits in this layout
(`slime.backends.upstream_batch`); its logits are already divided by the rollout temperature, so this does not
divide again (upstream's divided inside)."""

from __future__ import annotations

import torch

from slime.utils.ppo_utils import entropy_from_logits, log_probs_from_logits


def response_logits(logits: torch.Tensor, total_lengths, response_lengths) -> list[torch.Tensor]:
    """Each sample's `[R_i, V]` logits predicting its response tokens (the positions before them)."""
    flat, out, start = logits.reshape(-1, logits.shape[-1]), [], 0
    for total, response in zip(total_lengths, response_lengths):
        total, response = int(total), int(response)
        out.append(flat[start + total - response - 1:start + total - 1])
        start += total
    return out


def get_log_probs_and_entropy(logits: torch.Tensor, *, args=None, unconcat_tokens, total_lengths, response_lengths,
                              with_entropy: bool = False, non_loss_data: bool = True, max_seq_lens=None, **_):
    """`(empty tensor, {"log_probs": [R_i] per sample, "entropy": [R_i] per sample when asked})`, the shape
    OpenClaw-RL's losses unpack (`_, out = get_log_probs_and_entropy(...)`)."""
    log_probs, entropies = [], []
    for chunk, tokens, response in zip(response_logits(logits, total_lengths, response_lengths), unconcat_tokens,
                                       response_lengths):
        log_probs.append(log_probs_from_logits(chunk, tokens[len(tokens) - int(response):].to(chunk.device)))
        if with_entropy:
            entropies.append(entropy_from_logits(chunk))
    out = {"log_probs": log_probs}
    if with_entropy:
        out["entropy"] = entropies
    return torch.empty(0, device=logits.device), out
