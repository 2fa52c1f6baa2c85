"""Combine's losses (`--custom-loss-function-path combine_loss.combine_loss_function`, set by the method): the PPO
policy loss with advantage `w_rl * reward + w_opd * (teacher - old)`, and its top-K variant.

Same call contract as every loss (`slime.utils.loss`): `loss, metrics = fn(args, batch, logits, reduce)`. The math
is the framework's pure functions (`slime.utils.distill.combine_advantages`, the top-K KL term, the policy loss);
this module decides how Combine puts them together, and is the file a fork edits to change that.
"""

from __future__ import annotations

import torch

from slime.utils import distill, ppo_utils
from slime.utils.loss import (flag_or_env, opd_advantage_bound, policy_loss_function, teacher_topk_invalid_frac,
                              topk_kl_term)


def combine_weights(args) -> tuple[float, float]:
    """(w_rl, w_opd): `--combine-w-rl/--combine-w-opd`, else OPENCLAW_COMBINE_W_RL/_W_OPD, else 1.0 each.

    Read at every call, as upstream does, so a running job can be re-weighted through its environment.
    """
    return (float(flag_or_env(args, "combine_w_rl", "OPENCLAW_COMBINE_W_RL", 1.0)),
            float(flag_or_env(args, "combine_w_opd", "OPENCLAW_COMBINE_W_OPD", 1.0)))


def combine_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """Combine: the PPO policy loss with advantage `w_rl * r + w_opd * (teacher - old)`.

    Run with `--advantage-estimator grpo --disable-rewards-normalization`, so `batch["advantages"]` is
    the raw reward broadcast over the response. `old` is `old_log_probs` (recomputed, or the rollout's
    with --use-rollout-logprobs). A `teacher_mask` field (1 where a real teacher log-prob exists) makes
    RL-only samples' OPD term exactly 0; without one every sample of a batch that carries
    `teacher_log_probs` is taken to have a teacher.
    """
    if batch.get("advantages") is None or batch.get("old_log_probs") is None:
        raise ValueError("combine_loss_function needs advantages and old_log_probs: run it with "
                         "--advantage-estimator grpo --disable-rewards-normalization, without "
                         "--disable-compute-advantages-and-returns")
    w_rl, w_opd = combine_weights(args)
    bound = opd_advantage_bound(args)
    teacher, old, mask = batch.get("teacher_log_probs"), batch["old_log_probs"], batch["loss_mask"]
    advantages = distill.combine_advantages(batch["advantages"], teacher, old, w_rl, w_opd, bound, mask,
                                            batch.get("teacher_mask"))
    loss, metrics = policy_loss_function(args, {**batch, "advantages": advantages}, logits, reduce)
    opd = (distill.opd_advantages(teacher, old, mask, bound, batch.get("teacher_mask"))
           if teacher is not None else torch.zeros_like(old))
    metrics.update({"advantage_mean": reduce(advantages).detach(),
                    "rl_advantage_mean": reduce(batch["advantages"]).detach(),
                    "opd_advantage_mean": reduce(opd).detach(),
                    "opd_advantage_abs_mean": reduce(opd.abs()).detach()})
    return loss, metrics


def combine_topk_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """Combine with the top-K teacher term: the PPO policy loss on `w_rl * reward` plus `w_opd *` the top-K
    reverse KL to the hinted teacher (samples without a teacher contribute only the RL term).

    Token-level OPD only re-weights the tokens the student sampled, so a preference the policy never samples
    (open with a greeting) gets little push from it; the top-K term moves probability toward the teacher's
    own choices at every position, and `--distill-divergence forward` pulls up a teacher's choice the policy
    gives almost no probability at full strength. Score the teacher with `--distill-topk K`; run with
    `--advantage-estimator grpo --disable-rewards-normalization` so `advantages` is the raw reward.
    """
    if batch.get("advantages") is None or batch.get("old_log_probs") is None:
        raise ValueError("combine_topk_loss_function needs advantages and old_log_probs: run it with "
                         "--advantage-estimator grpo --disable-rewards-normalization")
    w_rl, w_opd = combine_weights(args)
    loss, metrics = policy_loss_function(args, {**batch, "advantages": w_rl * batch["advantages"]}, logits, reduce)
    metrics["rl_advantage_mean"] = reduce(batch["advantages"]).detach()
    if batch.get("teacher_topk_log_probs") is not None and batch.get("teacher_topk_indices") is not None:
        kl_loss, _, valid = topk_kl_term(args, batch, logits, reduce)
        loss = loss + w_opd * kl_loss
        metrics.update({"topk_kl_loss": kl_loss.detach(),
                        "teacher_topk_invalid_frac": teacher_topk_invalid_frac(batch, reduce, valid)})
    else:  # the same keys in every micro-batch and on every rank: the step's metric sums are all-reduced by key
        zero = torch.zeros((), dtype=loss.dtype)
        metrics.update({"topk_kl_loss": zero, "teacher_topk_invalid_frac": ppo_utils.MaskedMetric(zero, zero)})
    metrics["loss"] = loss.detach()
    return loss, metrics
