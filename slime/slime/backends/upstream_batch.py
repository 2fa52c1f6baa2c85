"""Custom losses written against upstream's batch layout (`--custom-loss-batch-layout upstream`): OpenClaw-RL's
method folders write `fn(args, batch, logits, sum_of_sample_mean)` for Megatron's packed sequences, where every
per-token field is a list of per-sample tensors, `logits` is `[1, T, V]` over the packed samples and the log-probs
come from `slime.backends.megatron_utils.loss.get_log_probs_and_entropy`. This trainer's losses get response-aligned
`[b, R]` fields and `[b, R, V]` logits. `upstream_layout(fn)` converts one into the other around the call:

* per-token fields as lists of `[R_i]` tensors: `advantages`, `returns` (GRPO's returns are its advantages),
  `log_probs` (the trainer's old log-probs), `ref_log_probs`, `rollout_log_probs`, `teacher_log_probs`,
  `loss_masks` and `full_loss_masks`; `teacher_topk_log_probs` / `teacher_topk_indices` as `[R_i, K]`;
* packed logits: sample i is its `R_i` response logits plus one unused position, so `total_lengths[i] = R_i + 1`
  and `unconcat_tokens[i]` = a placeholder then the response tokens (the position before each token predicts it,
  as in upstream's layout); the prompt is not in the batch (a loss never reads its logits);
* `sum_of_sample_mean(x)` takes the concatenated per-token tensor and reduces it with this trainer's reducer (its
  masks and sample weights, sample mean or per token as `--calculate-per-token-loss` says).

What the loss returns, `(loss, metrics)`, is used as any custom loss's. Costs one copy of the logits per micro-batch.
"""

from __future__ import annotations

import functools

import torch

# this trainer's name -> upstream's, for the per-token fields a loss batch may hold
PER_TOKEN = {"advantages": "advantages", "old_log_probs": "log_probs", "ref_log_probs": "ref_log_probs",
             "rollout_log_probs": "rollout_log_probs", "teacher_log_probs": "teacher_log_probs",
             "teacher_topk_log_probs": "teacher_topk_log_probs", "teacher_topk_indices": "teacher_topk_indices"}


def to_upstream(batch: dict, logits: torch.Tensor, reduce):
    """`(batch, logits, sum_of_sample_mean)` in upstream's layout from this trainer's loss batch."""
    lengths = [int(n) for n in batch["response_lengths"]]
    rows = range(len(lengths))

    def per_sample(x: torch.Tensor) -> list[torch.Tensor]:
        return [x[i, :lengths[i]] for i in rows]

    out = {theirs: per_sample(batch[ours]) for ours, theirs in PER_TOKEN.items() if batch.get(ours) is not None}
    out["returns"] = out.get("advantages")
    out["loss_masks"] = out["full_loss_masks"] = per_sample(batch["loss_mask"])
    tokens = batch["tokens"]
    out["unconcat_tokens"] = [torch.cat([tokens.new_zeros(1), tokens[i, :lengths[i]]]) for i in rows]
    out["tokens"] = torch.cat(out["unconcat_tokens"])[None]
    out["response_lengths"], out["total_lengths"] = lengths, [n + 1 for n in lengths]
    out.update(max_seq_lens=None, packed_seq_params=None, values=None, multimodal_train_inputs=None,
               dynamic_global_batch_size=None)
    spare = logits.new_zeros(1, logits.shape[-1])
    packed = torch.cat([piece for i in rows for piece in (logits[i, :lengths[i]], spare)])[None]

    def sum_of_sample_mean(x: torch.Tensor) -> torch.Tensor:
        padded = batch["loss_mask"].new_zeros(batch["loss_mask"].shape, dtype=x.dtype)
        for i, piece in zip(rows, x.split(lengths)):
            padded[i, :lengths[i]] = piece
        return reduce(padded)

    return out, packed, sum_of_sample_mean


def upstream_layout(fn):
    """The custom loss `fn`, written for upstream's layout, as this trainer calls a loss."""

    @functools.wraps(fn)
    def loss(args, batch: dict, logits: torch.Tensor, reduce):
        return fn(args, *to_upstream(batch, logits, reduce))

    loss.reads_reference = getattr(fn, "reads_reference", True)
    return loss
