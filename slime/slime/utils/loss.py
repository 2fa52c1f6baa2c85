"""The built-in losses, with the same call contract as a `--custom-loss-function-path` plugin.

    loss, metrics = fn(args, batch, logits, reduce)

`batch` holds response-aligned `[b, R]` tensors: `tokens` (the response token ids), `loss_mask`,
`advantages`, `old_log_probs` (the policy that generated/was recomputed before the step), and when
present `ref_log_probs`, `rollout_log_probs`, `teacher_log_probs`, `teacher_topk_log_probs`,
`teacher_topk_indices`, plus `response_lengths` and `total_lengths` (lists). `logits` is `[b, R, V]`,
already divided by the rollout temperature. `reduce(x)` turns a `[b, R]` per-token tensor into this
micro-batch's contribution (sum of per-sample masked means, or masked token sum with
`--calculate-per-token-loss`), each row's share multiplied by its `sample_weight` (`--off-policy-weight`); the
trainer scales the returned loss to the global batch. Metrics are returned as reduced scalars, so they aggregate
the same way; a metric that is defined on part of the batch only (TIS over on-policy rows, teacher validity over
rows with a teacher) is a `ppo_utils.MaskedMetric` (total, count) and is logged as total / count.
"""

from __future__ import annotations

import os

import torch

from slime.utils import distill, ppo_utils


def response_log_probs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    return ppo_utils.log_probs_from_logits(logits, tokens)


def policy_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """PPO clipped surrogate (asymmetric and dual clip; GSPO's sequence ratio), entropy bonus, KL loss.

    `--use-tis`: every token's policy-gradient loss is multiplied by the (detached) truncated importance
    weight `clamp(exp(old_log_probs - rollout_log_probs), --tis-clip-low, --tis-clip)`, so the batch must
    carry `rollout_log_probs` on every trained token.
    """
    # one log-softmax serves both the sampled-token log-probs and the entropy
    all_log_probs = torch.log_softmax(logits.float(), dim=-1)
    log_probs = all_log_probs.gather(-1, batch["tokens"].unsqueeze(-1)).squeeze(-1)
    mask = batch["loss_mask"]
    ppo_kl = batch["old_log_probs"] - log_probs
    if args.advantage_estimator == "gspo":
        ppo_kl = ppo_utils.gspo_sequence_kl(ppo_kl, mask)
    pg, clipfrac, *rest = ppo_utils.clipped_policy_loss(
        ppo_kl, batch["advantages"], args.eps_clip, args.eps_clip_high, getattr(args, "eps_clip_c", None)
    )
    tis_metrics = {}
    if getattr(args, "use_tis", False):
        rollout = batch.get("rollout_log_probs")
        present = batch.get("rollout_log_probs_mask")
        off_policy = batch.get("off_policy_mask")
        lacking = None if present is None else (mask != 0) & (present == 0)
        if lacking is not None and off_policy is not None:
            lacking = lacking & (off_policy == 0)  # off-policy samples have no behaviour log-probs by design
        if rollout is None and off_policy is not None and bool((off_policy != 0).all()):
            rollout = batch["old_log_probs"]  # only off-policy samples: every TIS weight is 1
        if rollout is None or (lacking is not None and bool(lacking.any())):
            raise ValueError("--use-tis needs rollout_log_probs (the engine's log-probs of the sampled tokens) on "
                             "every trained sample; "
                             + ("the batch has none" if rollout is None else "some samples of the batch lack them")
                             + ": have the rollout record them, or drop --use-tis")
        weights, ratio = ppo_utils.truncated_importance_weights(
            batch["old_log_probs"], rollout, getattr(args, "tis_clip_low", 0.0), getattr(args, "tis_clip", 2.0))
        # tokens that are not trained keep a weight of 1: a filler log-prob there cannot make the product NaN,
        # and neither can the fillers of samples without rollout log-probs (off-policy traces)
        trained = (mask != 0) if present is None else (mask != 0) & (present != 0)
        if off_policy is not None:
            trained = trained & (off_policy == 0)
        ratio = torch.where(trained, ratio, torch.ones_like(ratio))
        weights = torch.where(trained, weights, torch.ones_like(weights))
        clipped = (weights != ratio).to(pg.dtype)  # compared before any dtype cast
        weights = weights.to(pg.dtype)
        pg = pg * weights
        # averaged over the tokens TIS weighs (on-policy rows): off-policy rows sit at ratio 1 by construction
        tis_metrics = {"tis": ppo_utils.masked_metric(reduce, ratio, trained),
                       "tis_weight": ppo_utils.masked_metric(reduce, weights, trained),
                       "tis_clipfrac": ppo_utils.masked_metric(reduce, clipped, trained),
                       "tis_abs": ppo_utils.masked_metric(reduce, (ratio - 1).abs(), trained),
                       "ois": reduce(torch.exp(-ppo_kl)).detach()}
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
        **tis_metrics,
    }
    if rest and isinstance(rest[0], torch.Tensor):
        metrics["pg_dualclipfrac"] = reduce(rest[0].float()).detach()
    kl = None
    if batch.get("ref_topk_log_probs") is not None:
        # the full-distribution anchor (--kl-loss-topk): it also holds tokens the policy has stopped sampling
        kl = distill.topk_reverse_kl_from_log_probs(all_log_probs, batch["ref_topk_log_probs"],
                                                    batch["ref_topk_indices"])
    elif batch.get("ref_log_probs") is not None:
        # --use-unbiased-kl: the importance ratio multiplies the estimate before low_var_kl's clamp
        ratio = torch.exp(log_probs - batch["old_log_probs"]) if getattr(args, "use_unbiased_kl", False) else None
        kl = ppo_utils.compute_approx_kl(log_probs, batch["ref_log_probs"], args.kl_loss_type, importance_ratio=ratio)
    if kl is not None:
        kl_loss = reduce(kl)
        if args.use_kl_loss and args.kl_loss_coef:
            loss = loss + args.kl_loss_coef * kl_loss
        metrics["kl_loss"] = kl_loss.detach()
    if batch.get("rollout_log_probs") is not None:
        # the trainer's log-probs against the engine's: the recomputed old ones, or with --use-rollout-logprobs
        # (old = rollout, a gap of 0 by construction) the current forward's, as upstream reports it
        trainer = log_probs.detach() if getattr(args, "use_rollout_logprobs", False) else batch["old_log_probs"]
        diff = (trainer - batch["rollout_log_probs"]).abs()
        # rows without rollout log-probs (off-policy traces) have fillers there, not a gap: left out of the mean
        present = batch.get("rollout_log_probs_mask")
        metrics["train_rollout_logprob_abs_diff"] = ppo_utils.masked_metric(
            reduce, diff, torch.ones_like(diff) if present is None else present)
    else:  # a micro-batch of traces only: the same key on every rank (the step's sums are all-reduced by key)
        zero = torch.zeros((), dtype=loss.dtype)
        metrics["train_rollout_logprob_abs_diff"] = ppo_utils.MaskedMetric(zero, zero)
    metrics["loss"] = loss.detach()
    return loss, metrics


def sft_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """Negative log-likelihood of the masked response tokens."""
    loss = reduce(-response_log_probs(logits, batch["tokens"]))
    return loss, {"loss": loss.detach()}


def teacher_topk_invalid_frac(batch: dict, reduce, valid: torch.Tensor) -> ppo_utils.MaskedMetric:
    """The share of teacher top-K rows that are not a distribution, over the rows of samples that have a teacher
    (a Combine sample without one has filler rows, which are not the teacher's fault)."""
    has_teacher = batch.get("teacher_topk_mask")
    return ppo_utils.masked_metric(reduce, 1.0 - valid, torch.ones_like(valid) if has_teacher is None
                                   else has_teacher.to(valid.dtype))


def topk_kl_term(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reduced KL between the student and the teacher over the teacher's top-K tokens + a tail bin, the
    student's K+1 bins, the per-token validity of the teacher rows). The direction is `--distill-divergence`;
    `--distill-head-positions N` puts each sample's whole term on its first N trained tokens, and
    `--distill-divergent-positions N` on its N trained tokens of the largest divergence (0: every token):
    "reverse" KL(student || teacher), upstream's, or "forward" KL(teacher || student). Rows that are not a
    distribution (padding of samples without a teacher) are invalid and contribute exactly 0."""
    if batch.get("teacher_topk_log_probs") is None or batch.get("teacher_topk_indices") is None:
        raise ValueError("this loss needs teacher_topk_log_probs/teacher_topk_indices on its samples "
                         "(score the teacher with --distill-topk K)")
    teacher_log_probs = batch["teacher_topk_log_probs"]
    student = distill.with_tail_bin(distill.student_topk_log_probs(logits, batch["teacher_topk_indices"]))
    teacher = distill.with_tail_bin(distill.sanitize_teacher_topk_log_probs(teacher_log_probs)).to(student.dtype)
    valid = distill.valid_teacher_topk_rows(teacher_log_probs).to(student.dtype)
    divergence = getattr(args, "distill_divergence", None) or "reverse"
    per_token = distill.kl_over_bins(student, teacher, divergence) * valid
    head = getattr(args, "distill_head_positions", 0) or 0
    divergent = getattr(args, "distill_divergent_positions", 0) or 0
    if head:  # --distill-head-positions N: the term lives on each reply's first N trained tokens
        per_token = per_token * distill.head_position_weights(batch["loss_mask"], head).to(per_token.dtype)
    elif divergent:  # --distill-divergent-positions N: on the N tokens where the teacher disagrees most
        weights = distill.top_scored_position_weights(batch["loss_mask"], per_token, divergent)
        per_token = per_token * weights.to(per_token.dtype)
    return reduce(per_token), student, valid


def topk_distillation_loss_function(args, batch: dict, logits: torch.Tensor, reduce) -> tuple[torch.Tensor, dict]:
    """Top-K reverse KL to the teacher: K teacher tokens + a tail bin, no PPO ratio
    (`--distill-divergence forward`: KL(teacher || student) instead).

    A plain on-policy gradient of the truncated KL(student || teacher); `logits` are already divided by
    the rollout temperature, the same temperature the teacher must have been scored at.
    Teacher rows that are not a distribution (padding) contribute 0.
    """
    kl_loss, student, valid = topk_kl_term(args, batch, logits, reduce)
    # without an entropy bonus the (K+1-bin) entropy is only reported: keep it out of the autograd graph
    with torch.set_grad_enabled(bool(args.entropy_coef) and torch.is_grad_enabled()):
        entropy_loss = reduce(distill.entropy_over_bins(student) * valid)
    loss = kl_loss - args.entropy_coef * entropy_loss if args.entropy_coef else kl_loss
    metrics = {"loss": loss.detach(), "kl_loss": kl_loss.detach(), "entropy_loss": entropy_loss.detach(),
               "teacher_topk_invalid_frac": teacher_topk_invalid_frac(batch, reduce, valid)}
    return loss, metrics


def flag_or_env(args, name: str, env: str, default):
    value = getattr(args, name, None)
    if value is not None:
        return value
    raw = os.environ.get(env, "").strip()
    return type(default)(raw) if raw else default


def opd_advantage_bound(args) -> float | None:
    """Optional +-bound on the per-token OPD advantage (one far-off token cannot dominate a sample): `--opd-advantage-bound` or
    OPENCLAW_OPD_ADVANTAGE_BOUND; unset or 0 means unbounded, as upstream."""
    bound = float(flag_or_env(args, "opd_advantage_bound", "OPENCLAW_OPD_ADVANTAGE_BOUND", 0.0))
    return bound if bound > 0 else None


# Losses with no KL term: `--use-kl-loss` with a non-zero coefficient would load a reference model (and run its
# forward every step) for a loss that never reads `ref_log_probs`, so the trainer refuses that combination at start.
# A plugin says the same by setting `reads_reference = False` on its function.
sft_loss_function.reads_reference = False
topk_distillation_loss_function.reads_reference = False

BUILT_IN_LOSSES = {"policy_loss": policy_loss_function, "sft_loss": sft_loss_function}
