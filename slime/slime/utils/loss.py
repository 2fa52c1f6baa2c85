"""The built-in losses, with the same call contract as a `--custom-loss-function-path` plugin.

    loss, metrics = fn(args, batch, logits, reduce)

`batch` holds response-aligned `[b, R]` tensors: `tokens` (the response token ids), `loss_mask`,
`advantages`, `old_log_probs` (the policy that generated/was recomputed before the step), and when
present `ref_log_probs`, `rollout_log_probs`, `teacher_log_probs`, `teacher_topk_log_probs`,
`teacher_topk_indices`, plus `response_lengths` and `total_lengths` (lists). `logits` is `[b, R, V]`,
already divided by the rollout temperature. `reduce(x)` turns a `[b, R]` per-token tensor into this
micro-batch's contribution (sum of per-sample masked means, or masked token sum with
`--calculate-per-token-loss`); the trainer scales the returned loss to the global batch. Metrics are
returned as reduced scalars, so they aggregate the same way.
"""

from __future__ import annotations

import torch

from slime.utils import ppo_utils


def response_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return ppo_utils.log_probs_from_logits(logits, tokens)


def policy_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """PPO clipped surrogate (asymmetric and dual clip; GSPO's sequence ratio), entropy bonus, KL loss."""
    # one log-softmax serves both the sampled-token log-probs and the entropy
    all_log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs = all_log_probs.gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1)
    mask = batch["loss_mask"]
    ppo_kl = batch["old_log_probs"] - log_probs
    if args.advantage_estimator == "gspo":
        ppo_kl = ppo_utils.gspo_sequence_kl(ppo_kl, mask)
    pg, clipfrac, *rest = ppo_utils.compute_policy_loss(
        ppo_kl, batch["advantages"], args.eps_clip, args.eps_clip_high, getattr(args, "eps_clip_c", None)
    )
    pg_loss = reduce(pg)
    # without an entropy bonus the entropy is only reported: keep it out of the autograd graph
    with torch.set_grad_enabled(bool(args.entropy_coef) and torch.is_grad_enabled()):
        entropy = -(all_log_probs.exp() * all_log_probs).sum(-1)
        entropy_loss = reduce(entropy)
    loss = pg_loss - args.entropy_coef * entropy_loss if args.entropy_coef else pg_loss
    metrics = {
        "pg_loss": pg_loss.detach(),
        "pg_clipfrac": reduce(clipfrac).detach(),
        "ppo_kl": reduce(ppo_kl).detach(),
        "entropy_loss": entropy_loss.detach(),
    }
    if rest and isinstance(rest[0], torch.Tensor):
        metrics["pg_dualclipfrac"] = reduce(rest[0].float()).detach()
    if batch.get("ref_log_probs") is not None:
        kl = ppo_utils.compute_approx_kl(log_probs, batch["ref_log_probs"], args.kl_loss_type)
        if getattr(args, "use_unbiased_kl", False):
            kl = kl * torch.exp(log_probs - batch["old_log_probs"])
        kl_loss = reduce(kl)
        if args.use_kl_loss and args.kl_loss_coef:
            loss = loss + args.kl_loss_coef * kl_loss
        metrics["kl_loss"] = kl_loss.detach()
    if batch.get("rollout_log_probs") is not None:
        metrics["train_rollout_logprob_abs_diff"] = reduce(
            (batch["old_log_probs"] - batch["rollout_log_probs"]).abs()).detach()
    metrics["loss"] = loss.detach()
    return loss, metrics


def sft_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """Negative log-likelihood of the masked response tokens."""
    loss = reduce(-response_log_probs(logits, batch["tokens"]))
    return loss, {"loss": loss.detach()}


BUILT_IN_LOSSES = {"policy_loss": policy_loss_function, "sft_loss": sft_loss_function}
