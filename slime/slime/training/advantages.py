"""Per-token advantages for this rank's rows, after old/reference log-probs are known."""

from __future__ import annotations

import torch

from slime.backends.fsdp.parallel import all_reduce_sum
from slime.utils import ppo_utils
from slime.utils.loss import opd_advantage_bound


def _kl(args, old: torch.Tensor, ref: torch.Tensor | None) -> torch.Tensor:
    if ref is None or not args.kl_coef:
        return torch.zeros_like(old)
    return ppo_utils.compute_approx_kl(old, ref, args.kl_loss_type)


def attach_advantages(args, rows: list[dict], device: torch.device) -> None:
    """Fill `row["advantages"]` (one value per response token) following `--advantage-estimator`."""
    estimator = args.advantage_estimator
    for row in rows:
        old = torch.tensor(row["old_log_probs"], dtype=torch.float64).unsqueeze(0)
        mask = torch.tensor(row["loss_mask"], dtype=torch.float64).unsqueeze(0)
        ref = torch.tensor(row["ref_log_probs"], dtype=torch.float64).unsqueeze(0) if row.get("ref_log_probs") else None
        reward = torch.tensor([row["reward"]], dtype=torch.float64)
        if estimator == "step_wise":  # per-token values from the PRM path (train_data._step_wise)
            adv = torch.tensor(row["token_advantages"], dtype=torch.float64).unsqueeze(0) * mask
        elif estimator in ("grpo", "gspo"):
            adv = ppo_utils.grpo_advantages(reward, mask)
        elif estimator == "reinforce_plus_plus":
            adv = ppo_utils.reinforce_plus_plus_returns(reward, _kl(args, old, ref), mask, args.kl_coef, args.gamma)
        elif estimator == "reinforce_plus_plus_baseline":
            adv = (reward.unsqueeze(-1) - args.kl_coef * _kl(args, old, ref)) * mask
        elif estimator == "on_policy_distillation":
            if row.get("teacher_log_probs") is None:
                raise ValueError("--advantage-estimator on_policy_distillation needs teacher_log_probs on every sample")
            teacher = torch.tensor(row["teacher_log_probs"], dtype=torch.float64).unsqueeze(0)
            adv = ppo_utils.on_policy_distillation_advantages(teacher, old, mask, opd_advantage_bound(args))
        else:
            raise ValueError(f"unknown --advantage-estimator {estimator}")
        # an off-policy row's --off-policy-weight is not applied here: it scales the row's whole loss (every term,
        # after whitening) through its `sample_weight` (train_data.to_rows, batching.reducer)
        row["advantages"] = adv[0].tolist()
    if args.normalize_advantages and estimator != "step_wise":  # step_wise values are z-scores per bucket already
        _whiten_across_ranks(rows, device)


def _whiten_across_ranks(rows: list[dict], device: torch.device) -> None:
    """Masked whitening with the mean and variance of every trained token of every rank."""
    total = count = 0.0
    for row in rows:
        adv, mask = torch.tensor(row["advantages"]), torch.tensor(row["loss_mask"], dtype=torch.float32)
        total += float((adv * mask).sum())
        count += float(mask.sum())
    total, count = all_reduce_sum([total, count], device)
    mean = total / max(count, 1.0)
    sq = sum(float((((torch.tensor(r["advantages"]) - mean) ** 2) * torch.tensor(r["loss_mask"], dtype=torch.float32)).sum())
             for r in rows)
    (sq,) = all_reduce_sum([sq], device)
    scale = 1.0 / (sq / max(count, 1.0) + 1e-8) ** 0.5
    for row in rows:
        row["advantages"] = [(a - mean) * scale * m for a, m in zip(row["advantages"], row["loss_mask"])]
