"""Loss and advantage math as pure torch functions.

Convention: per-token tensors are aligned with the response and right-padded to `[B, T]`; `mask` is a
float or bool `[B, T]` tensor with 1 for tokens that are trained. Nothing here knows about models,
parallelism or process groups; callers reduce across ranks themselves.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

KL_TYPES = ("k1", "k2", "k3", "low_var_kl")


def _as_float_mask(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return mask.to(dtype=like.dtype if like.is_floating_point() else torch.float32)


# -------------------------------------------------------------------------------------------------- KL


def compute_approx_kl(
    log_probs: torch.Tensor,
    ref_log_probs: torch.Tensor,
    kl_type: str = "k1",
    importance_ratio: torch.Tensor | None = None,
    *,
    kl_loss_type: str | None = None,
) -> torch.Tensor:
    """Per-token estimate of KL(actor || ref) from sampled-token log-probs (Schulman's k1/k2/k3).
    (`kl_loss_type=` is upstream's keyword for `kl_type`, as ported losses pass it.)

    `importance_ratio` (`--use-unbiased-kl`: `exp(logp_new - logp_old)`) multiplies the estimate; for
    `low_var_kl` the clamp to [-10, 10] comes after that product, as upstream, so the clamp bounds what
    enters the loss rather than a value that is then scaled past it.
    """
    if kl_loss_type is not None:
        kl_type = kl_loss_type
    d = log_probs - ref_log_probs
    if kl_type == "k1":
        kl = d
    elif kl_type == "k2":
        kl = d.square() / 2
    elif kl_type in ("k3", "low_var_kl"):
        kl = torch.exp(-d) - 1 + d
    else:
        raise ValueError(f"unknown kl_type {kl_type!r}; expected one of {KL_TYPES}")
    if importance_ratio is not None:
        kl = importance_ratio * kl
    if kl_type == "low_var_kl":
        # exp(-d) explodes when the actor has drifted far from the reference on one token.
        kl = kl.clamp(min=-10.0, max=10.0)
    return kl


# ------------------------------------------------------------------------------------------------- TIS


def truncated_importance_weights(
    old_log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor,
    clip_low: float = 0.0,
    clip_high: float = 2.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TIS (`--use-tis`): per-token weights `clamp(exp(old - rollout), clip_low, clip_high)`, detached.

    `old_log_probs` are the trainer's recomputed log-probs of the sampled tokens, `rollout_log_probs` the
    engine's; the weight corrects the policy gradient for the gap between the two (different kernels,
    precision, or a stale engine). Returns `(weights, ratio)`: `ratio` is the unclamped `exp(old - rollout)`,
    so `weights != ratio` marks the clipped tokens.
    """
    if not 0 <= clip_low < clip_high:
        raise ValueError(f"TIS needs 0 <= clip_low < clip_high, got [{clip_low}, {clip_high}]")
    ratio = torch.exp(old_log_probs.detach() - rollout_log_probs.detach())
    return ratio.clamp(min=clip_low, max=clip_high), ratio


# ----------------------------------------------------------------------------------------- policy loss


def clipped_policy_loss(
    ppo_kl: torch.Tensor,
    advantages: torch.Tensor,
    eps_clip: float,
    eps_clip_high: float | None = None,
    eps_clip_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped PPO surrogate per token.

    `ppo_kl` is `old_log_probs - new_log_probs`, so the ratio is `exp(-ppo_kl)`. `eps_clip_high` defaults
    to `eps_clip` (asymmetric "clip-higher" when larger). With `eps_clip_c` (> 1) the dual clip bounds the
    loss of negative-advantage tokens at `-eps_clip_c * A`.

    Returns `(pg_losses, clipfrac, dual_clipfrac)`, all shaped like `advantages`; the two fractions are
    0/1 indicators to be reduced with the mask. `dual_clipfrac` is all zeros when dual clip is off.
    """
    if eps_clip_high is None:
        eps_clip_high = eps_clip
    ratio = torch.exp(-ppo_kl)
    loss_unclipped = -ratio * advantages
    loss_clipped = -ratio.clamp(1 - eps_clip, 1 + eps_clip_high) * advantages
    pg_losses = torch.maximum(loss_unclipped, loss_clipped)
    clipfrac = (loss_clipped > loss_unclipped).to(pg_losses.dtype)

    if eps_clip_c is None:
        return pg_losses, clipfrac, torch.zeros_like(pg_losses)
    if not eps_clip_c > 1.0:
        raise ValueError(f"eps_clip_c must be > 1 for dual clip, got {eps_clip_c}")
    dual_bound = -eps_clip_c * advantages
    negative = advantages < 0
    dual_clipfrac = (negative & (pg_losses > dual_bound)).to(pg_losses.dtype)
    pg_losses = torch.where(negative, torch.minimum(pg_losses, dual_bound), pg_losses)
    return pg_losses, clipfrac, dual_clipfrac


def compute_policy_loss(
    ppo_kl: torch.Tensor,
    advantages: torch.Tensor,
    eps_clip: float,
    eps_clip_high: float | None = None,
    eps_clip_c: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Upstream's call shape (`pg_losses, clipfrac = compute_policy_loss(ppo_kl, advantages, eps_clip,
    eps_clip_high)`, what ported custom losses unpack): :func:`clipped_policy_loss` without the dual-clip fraction."""
    pg_losses, clipfrac, _ = clipped_policy_loss(ppo_kl, advantages, eps_clip, eps_clip_high, eps_clip_c)
    return pg_losses, clipfrac


def gspo_sequence_kl(ppo_kl: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GSPO: replace every token's `ppo_kl` by its sample's masked mean (a sequence-level ratio)."""
    m = _as_float_mask(mask, ppo_kl)
    per_sample = (ppo_kl * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    return per_sample.unsqueeze(-1).expand_as(ppo_kl)


# ---------------------------------------------------------------------------------------------- logits


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    # Half-precision log-softmax loses most of the mass of the tail tokens.
    return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits


def log_probs_from_logits(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """`log_softmax(logits / temperature)` gathered at `tokens`; logits `[..., V]`, tokens `[...]`."""
    logits = _upcast(logits)
    if temperature != 1.0:
        logits = logits / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), -1, tokens.long().unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy (nats) of the softmax at every position; logits `[..., V]` -> `[...]`."""
    logits = _upcast(logits)
    if temperature != 1.0:
        logits = logits / temperature
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1)


# ---------------------------------------------------------------------------------------- aggregation


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over masked tokens of the whole batch (0 when nothing is masked in)."""
    m = _as_float_mask(mask, x)
    return (x * m).sum() / m.sum().clamp(min=1.0)


def _row_weights(weights: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    return None if weights is None else weights.reshape(-1).to(dtype=like.dtype, device=like.device)


def sum_of_sample_mean(x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """`sum_i w_i (sum_t m_it x_it) / max(1, sum_t m_it)`: sequence-level reduction, summed over samples.

    `weights` (one per row, default 1) scales each sample's whole contribution (`--off-policy-weight`)."""
    m = _as_float_mask(mask, x)
    per_sample = (x * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    w = _row_weights(weights, per_sample)
    return (per_sample if w is None else per_sample * w).sum()


def sum_of_tokens(x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """`sum_it w_i m_it x_it`: token-level reduction (the caller divides by the global token count)."""
    m = _as_float_mask(mask, x)
    w = _row_weights(weights, m)
    return (x * (m if w is None else m * w.view(-1, *([1] * (m.dim() - 1))))).sum()


class MaskedMetric(NamedTuple):
    """A metric averaged over a subset of the batch (the rows or tokens it is defined on): `total` and `count`
    are both reduced like the loss and summed over micro-batches and ranks, and the logged value is
    total / count. A plain reduced scalar would be divided by every sample (or token) of the batch, so rows
    where the metric means nothing (an off-policy row's TIS ratio, a teacher-less row's top-K validity) would
    pull it toward their filler value."""

    total: torch.Tensor
    count: torch.Tensor

    @property
    def value(self) -> torch.Tensor:
        """total / count (0 when the subset is empty): this micro-batch's value of the metric alone."""
        return self.total / self.count.clamp(min=1e-12) if float(self.count) > 0 else torch.zeros_like(self.total)


def masked_metric(reduce, x: torch.Tensor, include: torch.Tensor) -> MaskedMetric:
    """`x` averaged over where `include` (`[b, R]` or `[b, 1]`, 0/1) is 1, with the loss's own reduction."""
    include = include.to(x.dtype)
    return MaskedMetric(reduce((x * include).detach()), reduce(include.expand_as(x)).detach())


# ------------------------------------------------------------------------------------------ advantages


class SingletonGroupWarning(UserWarning):
    """A GRPO group had one sample, so its normalised advantage is 0 and it trains nothing."""


class SingletonGroupTracker:
    """Counts singleton GRPO groups over a run and warns the first time one appears.

    Keep one instance per run (e.g. on the rollout manager) and `record` the `singleton_groups` count that
    `grpo_normalize` reports for every batch.
    """

    def __init__(self) -> None:
        self.total = 0
        self.warned = False

    def record(self, count: int) -> None:
        if count <= 0:
            return
        self.total += count
        if not self.warned:
            self.warned = True
            warnings.warn(
                f"{count} GRPO group(s) of a single sample: with group normalisation their advantage is 0, so "
                "they contribute no gradient. Use n_samples_per_prompt > 1 or give related samples a shared "
                "group_index. Further occurrences are only counted.",
                SingletonGroupWarning,
                stacklevel=2,
            )


def _group_inverse(group_ids: torch.Tensor | Sequence[Any], n: int, device: torch.device) -> torch.Tensor:
    if isinstance(group_ids, torch.Tensor):
        ids = group_ids.to(device=device)
    else:
        # None means "no group assigned": all such samples share one group, as in slime.
        ids = torch.tensor([-1 if g is None else int(g) for g in group_ids], dtype=torch.long, device=device)
    if ids.shape != (n,):
        raise ValueError(f"group_ids: expected shape ({n},), got {tuple(ids.shape)}")
    return torch.unique(ids, return_inverse=True)[1]


def grpo_normalize(
    rewards: torch.Tensor,
    group_ids: torch.Tensor | Sequence[Any],
    use_std: bool,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, dict[str, int]]:
    """Group-relative rewards: subtract the group mean, and divide by (unbiased std + eps) when `use_std`.

    A one-sample group has no baseline other than itself, so it becomes 0 (and is never divided by a
    std). `info` reports `num_groups`, `singleton_groups` (feed it to a `SingletonGroupTracker`) and
    `constant_groups`: groups of two or more samples whose rewards are all equal, hence all 0 afterwards.
    """
    if rewards.dim() != 1:
        raise ValueError(f"rewards: expected shape [N], got {tuple(rewards.shape)}")
    n = rewards.shape[0]
    r = rewards if rewards.is_floating_point() else rewards.float()
    inverse = _group_inverse(group_ids, n, r.device)
    num_groups = int(inverse.max().item()) + 1 if n else 0

    counts = torch.zeros(num_groups, dtype=r.dtype, device=r.device).index_add_(0, inverse, torch.ones_like(r))
    sums = torch.zeros(num_groups, dtype=r.dtype, device=r.device).index_add_(0, inverse, r)
    centered = r - (sums / counts)[inverse]
    sizes = counts[inverse]

    if use_std:
        sq = torch.zeros(num_groups, dtype=r.dtype, device=r.device).index_add_(0, inverse, centered.square())
        denom = (sq / (counts - 1).clamp(min=1.0)).sqrt()[inverse] + eps
        # A zero denominator (constant group with eps=0) means a zero advantage, not NaN.
        normalized = torch.where(denom > 0, centered / denom.clamp(min=torch.finfo(r.dtype).tiny), centered)
    else:
        normalized = centered
    # Exactly zero, not float noise from `r - mean`.
    normalized = torch.where(sizes > 1, normalized, torch.zeros_like(normalized))

    group_max = torch.full((num_groups,), float("-inf"), dtype=r.dtype, device=r.device)
    group_min = torch.full((num_groups,), float("inf"), dtype=r.dtype, device=r.device)
    group_max = group_max.scatter_reduce(0, inverse, r, reduce="amax")
    group_min = group_min.scatter_reduce(0, inverse, r, reduce="amin")
    info = {
        "num_groups": num_groups,
        "singleton_groups": int((counts == 1).sum().item()),
        "constant_groups": int(((counts > 1) & (group_max == group_min)).sum().item()),
    }
    return normalized, info


def grpo_advantages(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GRPO/GSPO: every trained token of sample i gets the (already normalised) reward r_i."""
    return rewards.unsqueeze(-1) * _as_float_mask(mask, rewards)


def reinforce_plus_plus_returns(
    rewards: torch.Tensor,
    kl: torch.Tensor,
    mask: torch.Tensor,
    kl_coef: float,
    gamma: float,
) -> torch.Tensor:
    """REINFORCE++ discounted returns (used directly as advantages).

    Token rewards are `-kl_coef * kl_t * m_t`, plus the sample reward at its last masked token;
    `G_t = r_t + gamma * G_{t+1}` over the whole response (untrained tokens in between only discount).
    The result is multiplied by the mask; a sample with an all-zero mask gets zeros.
    """
    m = _as_float_mask(mask, kl)
    token_rewards = -kl_coef * kl * m
    length = m.shape[-1]
    positions = torch.arange(length, device=m.device).expand_as(m)
    last = torch.where(m > 0, positions, torch.full_like(positions, -1)).max(-1).values
    has_tokens = last >= 0
    rows = torch.nonzero(has_tokens).squeeze(-1)
    token_rewards = token_rewards.clone()
    token_rewards[rows, last[rows]] += rewards[rows].to(token_rewards.dtype)

    returns = torch.zeros_like(token_rewards)
    running = torch.zeros_like(token_rewards[..., 0])
    for t in range(length - 1, -1, -1):
        running = token_rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns * m


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """Whiten `x` with the mean and (population) variance of its masked tokens; untrained tokens become 0.

    With `shift_mean=False` the mean is added back, so only the scale changes.
    """
    m = _as_float_mask(mask, x)
    count = m.sum()
    if count == 0:
        return torch.zeros_like(x)
    mean = (x * m).sum() / count
    var = ((x - mean).square() * m).sum() / count
    whitened = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        whitened = whitened + mean
    return whitened * m


def on_policy_distillation_advantages(
    teacher_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    mask: torch.Tensor,
    bound: float | None = None,
) -> torch.Tensor:
    """OPD: `A_t = teacher_logp_t - student_logp_t` on trained tokens, optionally clamped to [-bound, bound].

    Exactly 0 where `mask` is 0, even when the teacher value there is not finite (a `torch.where`, not a
    product: NaN * 0 is NaN and would turn the whole loss into NaN).
    """
    adv = teacher_log_probs - old_log_probs
    if bound is not None:
        if not bound > 0:
            raise ValueError(f"bound must be > 0, got {bound}")
        adv = adv.clamp(-bound, bound)
    m = _as_float_mask(mask, adv)
    return torch.where(m != 0, adv * m, torch.zeros_like(adv))
