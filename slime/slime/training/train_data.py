"""Rank 0's side of a rollout: samples -> reward post-processing -> rows per optimizer step and rank.

Rows are plain dicts (picklable, broadcast to every rank) holding what the trainer needs per sample:
`tokens`, `response_length`, `loss_mask`, `reward` (post-processed), `raw_reward`, `rollout_log_probs`,
teacher fields, `weight_version`, `group_index`, `index`.
"""

from __future__ import annotations

import logging

import torch

from slime.utils.ppo_utils import SingletonGroupTracker, grpo_normalize
from slime.utils.types import Sample

log = logging.getLogger(__name__)

GROUP_NORMALISED = ("grpo", "gspo")


def flatten(groups) -> list[Sample]:
    out: list[Sample] = []
    for item in groups:
        if isinstance(item, Sample):
            out.append(item)
        else:
            out.extend(flatten(item))
    return out


def post_process_rewards(args, samples: list[Sample], tracker: SingletonGroupTracker) -> tuple[list[float], list[float], dict]:
    """(raw rewards, rewards the loss uses, metrics). A `--custom-reward-post-process-path` hook replaces this."""
    raw = [s.get_reward_value(args) for s in samples]
    hook = getattr(args, "hooks", {}).get("custom_reward_post_process_path")
    if hook is not None:
        raw, rewards = hook(args, samples)
        return list(raw), list(rewards), {}
    metrics: dict = {}
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


def to_rows(args, samples: list[Sample], rewards: list[float], raw: list[float]) -> list[dict]:
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
            "reward": float(reward),
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
        })
    return rows


def trim_to_steps(rows: list[dict], global_batch_size: int) -> list[dict]:
    """Keep a whole number of optimizer steps (the largest multiple of the global batch size)."""
    keep = len(rows) // global_batch_size * global_batch_size
    if keep < len(rows):
        log.info("rollout gave %d samples; training on %d (a multiple of --global-batch-size %d)",
                 len(rows), keep, global_batch_size)
    return rows[:keep]


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
