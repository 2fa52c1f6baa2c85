"""Ready-made `--dynamic-sampling-filter-path` hooks: `fn(args, group) -> DynamicFilterOutput`."""

from __future__ import annotations

from slime.utils.types import DynamicFilterOutput


def check_reward_nonzero_std(args, group) -> DynamicFilterOutput:
    """Keep a group only if its rewards differ: with group normalisation an all-equal group trains nothing."""
    rewards = [sample.get_reward_value(args) for sample in group]
    if max(rewards) - min(rewards) > 1e-12:
        return DynamicFilterOutput(keep=True)
    return DynamicFilterOutput(keep=False, reason=f"zero_std_{rewards[0]:g}")
