"""Rank 0's side of a rollout: samples -> reward post-processing -> rows per optimizer step and rank.

Rows are plain dicts (picklable, broadcast to every rank) holding what the trainer needs per sample:
`tokens`, `response_length`, `loss_mask`, `reward` (post-processed), `raw_reward`, `rollout_log_probs`,
teacher fields, `weight_version`, `group_index`, `index`, and a sample's images (`multimodal_inputs`,
`multimodal_train_inputs`) when it has any.
"""

from __future__ import annotations

import logging

import torch

from slime.training import trajectory_advantages
from slime.utils.ppo_utils import SingletonGroupTracker, grpo_normalize
from slime.utils.types import Sample

log = logging.getLogger(__name__)

GROUP_NORMALISED = ("grpo", "gspo")


def drop_constant(args, samples: list[Sample]) -> tuple[list[Sample], dict]:
    """`--constant-groups drop|drop-all`: leave out groups whose raw rewards all agree (zero advantage under GRPO, but
    they would still count in the loss's per-sample mean). An explicit choice, reported in the metrics. `drop` keeps
    the first group when all are constant (upstream's); `drop-all` keeps none, and the rollout trains nothing."""
    choice = getattr(args, "constant_groups", "keep")
    if choice not in ("drop", "drop-all") or args.advantage_estimator not in GROUP_NORMALISED:
        return samples, {}
    keep, report = trajectory_advantages.drop_constant_groups([s.get_reward_value(args) for s in samples],
                                                        [s.group_index for s in samples],
                                                        keep_one=choice == "drop")
    if report["dropped_groups"]:
        log.info("%s", report["message"])
    kept = [s for s, k in zip(samples, keep) if k]
    return kept, {"rollout/constant_groups": report["constant_groups"],
                  "rollout/dropped_constant_groups": report["dropped_groups"],
                  "rollout/dropped_constant_samples": report["dropped_samples"]}


def post_process_rewards(args, samples: list[Sample], tracker: SingletonGroupTracker) -> tuple[list[float], list, dict]:
    """(raw rewards, rewards the loss uses, metrics). A `--custom-reward-post-process-path` hook replaces this.

    The rewards the loss uses are one number per sample, except for `--advantage-estimator step_wise`: one list
    per sample of per-token advantages (each PRM-judged step's normalised target on its token span)."""
    raw = [s.get_reward_value(args) for s in samples]
    hook = getattr(args, "hooks", {}).get("custom_reward_post_process_path")
    if hook is not None:
        raw, rewards = hook(args, samples)
        return list(raw), list(rewards), {}
    metrics: dict = {}
    if getattr(args, "loss_type", None) == "sft_loss":  # supervised rows: no rewards to normalise, no advantages
        return raw, list(raw), metrics
    if args.advantage_estimator == "step_wise":
        return raw, *_step_wise(args, samples)
    if args.advantage_estimator in GROUP_NORMALISED and not args.disable_rewards_normalization \
            and (getattr(args, "dynamic_history", False) or shares_trajectories(samples)):
        # one reward per trajectory (group_index, index), normalised over the group's trajectories, given to
        # every step sample of that trajectory. Also without --dynamic-history when samples share a trajectory
        # (terminal and GUI always return one sample per turn): normalising over step samples would weigh each
        # trajectory's reward in the group's mean and std by its number of steps
        advantages, report = trajectory_advantages.outcome_advantages(
            raw, [s.group_index for s in samples], [s.index for s in samples],
            std="unbiased" if args.grpo_std_normalization else "none",
            length_normalize=getattr(args, "trajectory_length_normalize", False))
        tracker.record(report["singleton_groups"])
        return raw, advantages, {"rollout/trajectories": report["num_trajectories"],
                                 "rollout/singleton_groups": report["singleton_groups"],
                                 "rollout/singleton_groups_total": tracker.total,
                                 "rollout/zero_std_groups": report["constant_groups"]}
    if args.advantage_estimator in GROUP_NORMALISED and not args.disable_rewards_normalization:
        normalised, info = grpo_normalize(torch.tensor(raw, dtype=torch.float64), [s.group_index for s in samples],
                                          use_std=not args.disable_grpo_std_normalization)
        tracker.record(info["singleton_groups"])
        metrics = {"rollout/singleton_groups": info["singleton_groups"],
                   "rollout/singleton_groups_total": tracker.total,
                   "rollout/zero_std_groups": info["constant_groups"]}
        return raw, normalised.tolist(), metrics
    if args.advantage_estimator == "reinforce_plus_plus_baseline" and not args.disable_rewards_normalization:
        normalised, _ = grpo_normalize(torch.tensor(raw, dtype=torch.float64), [s.group_index for s in samples],
                                       use_std=False)
        return raw, normalised.tolist(), metrics
    return raw, list(raw), metrics


def shares_trajectories(samples: list[Sample]) -> bool:
    """Whether two samples belong to one trajectory: the same (group_index, index), both set."""
    keys = [(s.group_index, s.index) for s in samples if s.index is not None]
    return len(set(keys)) < len(keys)


def _step_wise(args, samples: list[Sample]) -> tuple[list[list[float]], dict]:
    """The PRM estimator: every sample carries `metadata["step_wise"]` (its steps' scores, indices, spans).
    `--disable-rewards-normalization` trains on the raw step targets (upstream); `--step-wise-unjudged` decides the
    steps the PRM could not judge."""
    steps = []
    unjudged = getattr(args, "step_wise_unjudged", "skip")
    for s in samples:
        info = (s.metadata or {}).get("step_wise")
        if not info:
            raise ValueError(f"--advantage-estimator step_wise: sample {s.index} has no metadata['step_wise'] "
                             "(its generate function must record each step's score and token span)")
        mask = list(s.loss_mask) if s.loss_mask is not None else [1] * s.response_length
        steps.append(trajectory_advantages.stepwise_sample_from_metadata(s.group_index, mask, info, unjudged=unjudged))
    result = trajectory_advantages.step_wise_advantages(
        steps, singleton=getattr(args, "step_wise_singleton", "zero"),
        constant="drop" if getattr(args, "constant_groups", "keep") == "drop" else "zero",
        normalize=not getattr(args, "disable_rewards_normalization", False))
    for sample, remove in zip(samples, result.remove):
        if remove:
            sample.remove_sample = True
    report = result.report
    return result.advantages, {f"rollout/step_wise/{k}": v for k, v in report.items() if isinstance(v, (int, float))}


def take_whole_steps(rows: list[dict], global_batch_size: int) -> tuple[list[dict], list[dict]]:
    """(rows to train now: a whole number of optimizer steps, the rest). The rest is carried to the front of the
    next rollout's rows instead of being dropped (upstream dropped the tail, which biases against samples that
    arrive last, e.g. the steps of long trajectories)."""
    keep = len(rows) // global_batch_size * global_batch_size
    return rows[:keep], rows[keep:]


def to_rows(args, samples: list[Sample], rewards: list, raw: list[float]) -> list[dict]:
    rows = []
    for sample, reward, raw_reward in zip(samples, rewards, raw):
        sample.validate()
        off_policy = bool((sample.metadata or {}).get("off_policy"))
        missing = sample.rollout_log_probs is None and not sample.remove_sample
        # refused here, on rank 0 before the rows are dealt out, rather than in one rank's loss. An off-policy
        # sample (another model wrote it) has no behaviour log-probs to correct with: TIS leaves it at weight 1.
        if getattr(args, "use_tis", False) and missing and not off_policy:
            raise ValueError(f"--use-tis needs rollout_log_probs on every sample; sample {sample.index} has none "
                             "(its rollout did not record the engine's log-probs): record them or drop --use-tis")
        if getattr(args, "use_rollout_logprobs", False) and missing:
            raise ValueError(f"--use-rollout-logprobs takes the old log-probs from the engine, and sample "
                             f"{sample.index} has none" + (" (an off-policy trace)" if off_policy else "")
                             + ": drop --use-rollout-logprobs so the trainer recomputes them")
        mask = list(sample.loss_mask) if sample.loss_mask is not None else [1] * sample.response_length
        if sample.remove_sample:
            mask = [0] * sample.response_length
        rows.append({
            "tokens": list(sample.tokens),
            "response_length": sample.response_length,
            "loss_mask": mask,
            # step_wise: per-token advantages (a list); otherwise one number per sample
            "reward": float(sum(reward) / max(len(reward), 1)) if isinstance(reward, list) else float(reward),
            "token_advantages": list(reward) if isinstance(reward, list) else None,
            "raw_reward": float(raw_reward),
            "rollout_log_probs": sample.rollout_log_probs,
            "teacher_log_probs": sample.teacher_log_probs,
            "teacher_topk_log_probs": sample.teacher_topk_log_probs,
            "teacher_topk_indices": sample.teacher_topk_indices,
            "weight_version": sample.weight_version,
            "group_index": sample.group_index,
            "index": sample.index,
            "truncated": sample.status == Sample.Status.TRUNCATED,
            "off_policy": off_policy,
            # one weight for every term the row adds to the loss (batching.reducer): --off-policy-weight for traces
            # another model wrote, so 0 keeps them out of training whatever the loss
            "sample_weight": float(getattr(args, "off_policy_weight", 1.0)) if off_policy else 1.0,
        })
        # images only on the rows that have them: text rows stay as they were
        if sample.multimodal_inputs:
            rows[-1]["multimodal_inputs"] = sample.multimodal_inputs
        if sample.multimodal_train_inputs:
            rows[-1]["multimodal_train_inputs"] = sample.multimodal_train_inputs
    return rows


def shard_for_ranks(rows: list[dict], global_batch_size: int, world_size: int) -> list[list[dict]]:
    """Deal each step's samples round-robin over ranks, so every rank gets gbs/world rows per step."""
    shards: list[list[dict]] = [[] for _ in range(world_size)]
    for start in range(0, len(rows), global_batch_size):
        step = rows[start : start + global_batch_size]
        for i, row in enumerate(step):
            shards[i % world_size].append(row)
    return shards


def rollout_metrics(rows: list[dict], samples: list[Sample]) -> dict:
    if not rows:
        return {}
    raw = torch.tensor([r["raw_reward"] for r in rows], dtype=torch.float64)
    lengths = torch.tensor([float(sum(r["loss_mask"])) for r in rows])
    return {
        "rollout/raw_reward": float(raw.mean()),
        "rollout/raw_reward_std": float(raw.std()) if len(rows) > 1 else 0.0,
        "rollout/response_len/mean": float(lengths.mean()),
        "rollout/response_len/max": float(lengths.max()),
        "rollout/truncated_ratio": sum(r["truncated"] for r in rows) / len(rows),
        "rollout/samples": len(samples),
    }
