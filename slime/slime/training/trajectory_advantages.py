"""Advantages for multi-turn agent rollouts (GRPO over trajectories, PRM step-wise), as pure functions on plain
lists (no I/O, no torch). The trainer (`slime.training.train_data`) calls them next to its other advantages
(`slime.training.advantages`); what the environment and judges said becomes rewards in `slime.agentic.rewards`.

A trajectory is one episode of an agent in an environment; with `--dynamic-history` it becomes one training
sample per step, all sharing `group_index` (the task) and `index` (the trajectory).

* `drop_constant_groups`: the constant-group drop (a group whose raw rewards all agree teaches nothing), as
  an explicit, switchable, reported choice.
* `outcome_advantages`: GRPO over trajectories: one reward per (group, trajectory), z-scored within the
  group, broadcast to the trajectory's step samples; optional `length_normalize`.
* `step_wise_advantages` (with `StepwiseSample`, `stepwise_sample_from_metadata`): the PRM path: per-step
  targets z-scored per (group, step index) bucket with population std, each broadcast over its step's token
  span times the loss mask; an unjudged step is left out of its bucket unless `--step-wise-unjudged outcome`.

Where this deliberately differs from the original (see `../shared/reference/track2_spec.md` §7.1):

* `outcome_advantages` refuses step samples of one trajectory that disagree on the reward (the original
  silently took the first one seen), and offers `length_normalize` (§7.1.6: with one sample per step, a long
  trajectory otherwise weighs as much as its number of steps). Off by default, as upstream.
* `step_wise_advantages` gives a singleton bucket (a step index that only one trajectory of the group reached)
  advantage 0 by default (`singleton="zero"`); the original passed its raw target (in [-2, 2]) next to
  z-scores of the other buckets, mixing scales (§7.1.5). `singleton="raw"` restores the original. Constant
  buckets are counted and reported instead of being dropped silently.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["StepwiseResult", "StepwiseSample", "check_finite", "drop_constant_groups", "infer_span",
           "outcome_advantages", "step_wise_advantages", "stepwise_sample_from_metadata"]

STD_KINDS = ("unbiased", "population", "none")


def check_finite(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def _first_seen_order(keys: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """key -> positions holding it, keys in order of first appearance."""
    positions: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        positions.setdefault(key, []).append(i)
    return positions


def _zscores(values: Sequence[float], std: str, eps: float, tol: float = 1e-12) -> tuple[list[float], str]:
    """(v - mean) / (std + eps) for one group, and what kind of group it was.

    Kind: "singleton" (one value: no baseline but itself, so 0), "constant" (all values within `tol` of each
    other: exactly 0, not float noise and never 0/0), or "normal".
    """
    n = len(values)
    if n == 1:
        return [0.0], "singleton"
    if max(values) - min(values) <= tol:
        return [0.0] * n, "constant"
    mean = math.fsum(values) / n
    centered = [v - mean for v in values]
    if std == "none":
        return centered, "normal"
    ddof = 1 if std == "unbiased" else 0
    sigma = math.sqrt(math.fsum(c * c for c in centered) / (n - ddof))
    return [c / (sigma + eps) for c in centered], "normal"


# --------------------------------------------------------------------------------------- constant groups


def drop_constant_groups(
    rewards: Sequence[float],
    group_ids: Sequence[Hashable],
    tol: float = 1e-12,
    *,
    enabled: bool = True,
    keep_one: bool = True,
) -> tuple[list[bool], dict[str, Any]]:
    """(keep mask over samples, report): drop every group whose raw rewards all agree (max - min <= tol).

    Such a group has zero advantage under GRPO, so it adds no gradient but still counts in the loss's
    per-sample average. The drop is a choice, not a law: `enabled=False` keeps everything (the report says
    so). If every group is constant the first group (in order of first appearance) is kept, as upstream, so
    a batch is never empty; `report["kept_first_of_all_constant"]` says when that happened. `keep_one=False`
    drops that one too (the mask may then be all False: the caller skips the optimizer step, which on a CPU saves
    a whole step that only the KL term would move). The caller logs
    `report["message"]`. With dynamic history pass the step samples: a group is constant when all its
    trajectories' rewards agree.
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"rewards ({len(rewards)}) and group_ids ({len(group_ids)}) differ in length")
    values = [check_finite(f"rewards[{i}]", r) for i, r in enumerate(rewards)]
    groups = _first_seen_order(group_ids)
    constant = [g for g, idx in groups.items() if max(values[i] for i in idx) - min(values[i] for i in idx) <= tol]
    report: dict[str, Any] = {
        "enabled": enabled,
        "num_groups": len(groups),
        "constant_groups": len(constant),
        "dropped_groups": 0,
        "dropped_samples": 0,
        "kept_samples": len(values),
        "kept_first_of_all_constant": False,
    }
    if not enabled:
        report["message"] = (f"constant-group drop disabled: {len(constant)} of {len(groups)} groups are constant "
                             "and train with zero advantage")
        return [True] * len(values), report
    dropped = set(constant)
    if groups and len(dropped) == len(groups) and keep_one:
        dropped.discard(next(iter(groups)))
        report["kept_first_of_all_constant"] = True
    keep = [group_ids[i] not in dropped for i in range(len(values))]
    report["dropped_groups"] = len(dropped)
    report["dropped_samples"] = keep.count(False)
    report["kept_samples"] = keep.count(True)
    report["message"] = (f"dropped {len(dropped)} of {len(groups)} groups ({report['dropped_samples']} samples) whose "
                         f"rewards are all equal" + ("; every group was constant, so the first is kept"
                                                     if report["kept_first_of_all_constant"] else ""))
    return keep, report


# ------------------------------------------------------------------------------------- outcome (GRPO)


def outcome_advantages(
    rewards: Sequence[float],
    group_ids: Sequence[Hashable],
    traj_ids: Sequence[Hashable],
    *,
    std: str = "unbiased",
    eps: float = 1e-6,
    length_normalize: bool = False,
    tol: float = 1e-12,
) -> tuple[list[float], dict[str, int]]:
    """GRPO over trajectories: (one advantage per step sample, report).

    `rewards[i]` is the outcome reward of the trajectory that step sample i belongs to; the trajectory key is
    `(group_ids[i], traj_ids[i])`. Every step sample of a trajectory must carry the same reward (within
    `tol`; a ValueError otherwise: per-step rewards belong in `step_wise_advantages`). The trajectory rewards
    of a group are normalised as `(r - mean) / (std + eps)` over the group's *trajectories* (not its step
    samples) with `std` "unbiased" (n - 1, upstream GRPO), "population" (n) or "none" (centre only), and the
    value is given to each of the trajectory's step samples. A group with a single trajectory gets 0; a
    group whose trajectories all agree gets exactly 0.

    `length_normalize=True` divides each step sample's advantage by its trajectory's number of step samples,
    so every trajectory weighs the same in a sum over samples (§7.1.6: otherwise a trajectory of 10 steps
    counts 10 times). Off by default, as upstream. Without dynamic history (one sample per trajectory, all
    traj ids distinct) this is plain per-group GRPO.

    Report: `num_groups`, `num_trajectories`, `singleton_groups`, `constant_groups`.
    """
    if std not in STD_KINDS:
        raise ValueError(f"std must be one of {STD_KINDS}, got {std!r}")
    if not len(rewards) == len(group_ids) == len(traj_ids):
        raise ValueError(f"rewards ({len(rewards)}), group_ids ({len(group_ids)}) and traj_ids ({len(traj_ids)}) "
                         "differ in length")
    values = [check_finite(f"rewards[{i}]", r) for i, r in enumerate(rewards)]
    trajectories = _first_seen_order(list(zip(group_ids, traj_ids)))
    traj_reward: dict[Hashable, float] = {}
    for key, idx in trajectories.items():
        first = values[idx[0]]
        for i in idx[1:]:
            if abs(values[i] - first) > tol:
                raise ValueError(f"trajectory {key}: step samples carry different outcome rewards ({first} at sample "
                                 f"{idx[0]}, {values[i]} at sample {i}); an outcome reward is one per trajectory "
                                 "(use step_wise_advantages for per-step rewards)")
        traj_reward[key] = first

    groups = _first_seen_order([key[0] for key in trajectories])
    traj_keys = list(trajectories)
    traj_adv: dict[Hashable, float] = {}
    report = {"num_groups": len(groups), "num_trajectories": len(trajectories), "singleton_groups": 0,
              "constant_groups": 0}
    for positions in groups.values():
        keys = [traj_keys[p] for p in positions]
        normalised, kind = _zscores([traj_reward[k] for k in keys], std, eps, tol)
        if kind == "singleton":
            report["singleton_groups"] += 1
        elif kind == "constant":
            report["constant_groups"] += 1
        traj_adv.update(zip(keys, normalised))

    out = [0.0] * len(values)
    for key, idx in trajectories.items():
        value = traj_adv[key] / len(idx) if length_normalize else traj_adv[key]
        for i in idx:
            out[i] = value
    return out, report


# ---------------------------------------------------------------------------------- step composition


@dataclass
class StepwiseSample:
    """What `step_wise_advantages` needs of one training sample.

    `loss_mask` is aligned with the response; `spans[k] = (start, end)` are response-token positions
    (end exclusive) of step k. `scores[k]` is step k's composed target (`compose_step_target`), or None when
    the step has no target (it is then left out of its bucket and gets advantage 0). `spans=None` is allowed
    for a one-step sample (dynamic history): the span is inferred from the loss mask (`infer_span`).
    """

    group_id: Hashable
    loss_mask: Sequence[int]
    scores: Sequence[float | None]
    step_indices: Sequence[int]
    spans: Sequence[tuple[int, int]] | None = None


class StepwiseResult(NamedTuple):
    advantages: list[list[float]]  # per sample, per response token: the step's value on its span x loss mask
    step_values: list[list[float | None]]  # per sample, per step: the normalised value (None: unscored)
    remove: list[bool]  # samples left with no step in a kept bucket (constant="drop"): train nothing
    report: dict[str, Any]


def infer_span(loss_mask: Sequence[int]) -> tuple[int, int]:
    """[first position with mask 1, last position with mask 1, + 1); (0, 0) when nothing is trained."""
    ones = [i for i, m in enumerate(loss_mask) if m]
    return (ones[0], ones[-1] + 1) if ones else (0, 0)


UNJUDGED_MODES = ("skip", "outcome")


def stepwise_sample_from_metadata(group_id: Hashable, loss_mask: Sequence[int], step_wise: dict,
                                  unjudged: str = "skip") -> StepwiseSample:
    """Read upstream's `metadata["step_wise"]` layout: `step_scores_with_outcome` preferred over
    `step_scores`, `step_indices` (or the `step_index` of each `steps` entry, or 0..n-1) and
    `step_token_spans` (optional).

    `unjudged` (`--step-wise-unjudged`) decides a step whose PRM gave no valid vote (`prm_scores[k]` None, as
    `attach_step_targets` records it): "skip" (default) leaves it out of its bucket, so it gets advantage 0 and
    does not move its bucket's mean and std; "outcome" trains it on the outcome alone, as a 0 vote would (upstream
    scored a failed vote 0). Samples without `prm_scores` (upstream's layout) have every step judged."""
    if unjudged not in UNJUDGED_MODES:
        raise ValueError(f"unjudged must be one of {UNJUDGED_MODES}, got {unjudged!r}")
    scores = step_wise.get("step_scores_with_outcome")
    if scores is None:
        scores = step_wise.get("step_scores")
    if scores is None:
        raise ValueError("metadata step_wise has neither step_scores_with_outcome nor step_scores")
    prm = step_wise.get("prm_scores")
    if unjudged == "skip" and prm is not None:
        if len(prm) != len(scores):
            raise ValueError(f"metadata step_wise: {len(prm)} prm_scores for {len(scores)} step scores")
        scores = [None if p is None else v for v, p in zip(scores, prm)]
    indices = step_wise.get("step_indices")
    if indices is None and step_wise.get("steps"):
        indices = [step["step_index"] for step in step_wise["steps"]]
    if indices is None:
        indices = list(range(len(scores)))
    spans = step_wise.get("step_token_spans")
    return StepwiseSample(group_id, list(loss_mask), list(scores), list(indices),
                          [tuple(s) for s in spans] if spans is not None else None)


def _spans_of(i: int, sample: StepwiseSample) -> tuple[list[tuple[int, int]], bool]:
    n_steps, length = len(sample.scores), len(sample.loss_mask)
    if sample.spans is None:
        if n_steps != 1:
            raise ValueError(f"sample {i}: {n_steps} steps but no token spans; spans can only be inferred for a "
                             "one-step (dynamic-history) sample")
        return [infer_span(sample.loss_mask)], True
    spans = [(int(a), int(b)) for a, b in sample.spans]
    if len(spans) != n_steps:
        raise ValueError(f"sample {i}: {n_steps} step scores but {len(spans)} spans")
    covered = [False] * length
    for start, end in spans:
        if not 0 <= start <= end <= length:
            raise ValueError(f"sample {i}: span [{start}, {end}) outside the response of {length} tokens")
        if any(covered[start:end]):
            raise ValueError(f"sample {i}: span [{start}, {end}) overlaps another step's span")
        covered[start:end] = [True] * (end - start)
    return spans, False


def step_wise_advantages(
    samples: Sequence[StepwiseSample],
    *,
    eps: float = 1e-6,
    singleton: str = "zero",
    constant: str = "drop",
    normalize: bool = True,
    tol: float = 1e-12,
) -> StepwiseResult:
    """The PRM (`step_wise`) estimator: per-token advantages from per-step targets.

    Steps are bucketed by `(group_id, step_index)` (the same step of the same task across its
    trajectories) and z-scored inside the bucket with the POPULATION std, as upstream:
    `(v - mean) / (sigma + eps)`, `sigma = sqrt(sum (v - mean)^2 / n)`. Each step's value is then written on
    the tokens of its span and multiplied by the loss mask (observation tokens inside a span stay 0); tokens
    in no span get 0.

    * `singleton`: a bucket of one step (a step index that only one trajectory of the group reached) has no
      baseline. "zero" (default) gives it 0; "raw" passes the raw target as upstream did, which mixes raw
      values in [-2, 2] with z-scores (§7.1.5), so only choose it knowingly.
    * `constant`: a bucket of two or more steps whose variance is <= `tol` gets exactly 0 (never 0/0).
      "drop" (default, upstream) also drops the bucket: a sample left with no step in a kept bucket is
      flagged in `remove` (train it with an all-zero loss mask), and if every bucket is constant the first
      is kept. "zero" keeps every sample. Either way the report counts them.
    * `normalize=False` (`--disable-rewards-normalization`): every scored step trains on its raw target, as
      upstream does then; buckets are counted but nothing is z-scored, zeroed or dropped.

    Report: `num_buckets`, `singleton_buckets`, `constant_buckets`, `dropped_buckets`,
    `kept_first_of_all_constant`, `unscored_steps`, `inferred_spans`, `removed_samples`, `empty_spans`.
    """
    if singleton not in ("zero", "raw"):
        raise ValueError(f"singleton must be 'zero' or 'raw', got {singleton!r}")
    if constant not in ("drop", "zero"):
        raise ValueError(f"constant must be 'drop' or 'zero', got {constant!r}")

    all_spans: list[list[tuple[int, int]]] = []
    buckets: dict[Hashable, list[tuple[int, int]]] = {}  # (group, step index) -> [(sample, step)]
    report: dict[str, Any] = {"num_buckets": 0, "singleton_buckets": 0, "constant_buckets": 0, "dropped_buckets": 0,
                              "kept_first_of_all_constant": False, "unscored_steps": 0, "inferred_spans": 0,
                              "removed_samples": 0, "empty_spans": 0}
    for i, sample in enumerate(samples):
        if len(sample.step_indices) != len(sample.scores):
            raise ValueError(f"sample {i}: {len(sample.scores)} step scores but "
                             f"{len(sample.step_indices)} step indices")
        spans, inferred = _spans_of(i, sample)
        report["inferred_spans"] += inferred
        report["empty_spans"] += sum(1 for a, b in spans if a == b)
        all_spans.append(spans)
        for k, (score, step_index) in enumerate(zip(sample.scores, sample.step_indices)):
            if score is None:
                report["unscored_steps"] += 1
                continue
            check_finite(f"sample {i} step {k} score", score)
            buckets.setdefault((sample.group_id, step_index), []).append((i, k))

    step_values: list[list[float | None]] = [[None] * len(s.scores) for s in samples]
    kept: list[Hashable] = []
    constant_keys: list[Hashable] = []
    for key, members in buckets.items():
        raw = [float(samples[i].scores[k]) for i, k in members]
        if not normalize:
            kept.append(key)
            for (i, k), value in zip(members, raw):
                step_values[i][k] = value
            continue
        if len(raw) > 1 and _population_variance(raw) <= tol:  # upstream's criterion: variance, not range
            normalised, kind = [0.0] * len(raw), "constant"
        else:
            normalised, kind = _zscores(raw, "population", eps, tol=0.0)
        if kind == "singleton":
            report["singleton_buckets"] += 1
            normalised = raw if singleton == "raw" else [0.0]
        if kind == "constant":
            report["constant_buckets"] += 1
            constant_keys.append(key)
        else:
            kept.append(key)
        for (i, k), value in zip(members, normalised):
            step_values[i][k] = value
    report["num_buckets"] = len(buckets)

    dropped: set[Hashable] = set()
    if constant == "drop" and normalize:
        dropped = set(constant_keys)
        if buckets and not kept:
            dropped.discard(next(iter(buckets)))
            report["kept_first_of_all_constant"] = True
        report["dropped_buckets"] = len(dropped)

    in_kept_bucket = [False] * len(samples)
    for key, members in buckets.items():
        if key not in dropped:
            for i, _ in members:
                in_kept_bucket[i] = True
    remove = [constant == "drop" and normalize and not flag for flag in in_kept_bucket]
    report["removed_samples"] = sum(remove)

    advantages: list[list[float]] = []
    for sample, spans, values in zip(samples, all_spans, step_values):
        token_adv = [0.0] * len(sample.loss_mask)
        for (start, end), value in zip(spans, values):
            if value is None:
                continue
            for t in range(start, end):
                token_adv[t] = value * sample.loss_mask[t]
        advantages.append(token_adv)
    return StepwiseResult(advantages, step_values, remove, report)


def _population_variance(values: Sequence[float]) -> float:
    mean = math.fsum(values) / len(values)
    return math.fsum((v - mean) ** 2 for v in values) / len(values)


# ---------------------------------------------------------------------------------------------- boxes
