"""Ready-made `--dynamic-sampling-filter-path` hooks: `fn(args, group) -> DynamicFilterOutput`."""

from __future__ import annotations

from slime.utils.types import DynamicFilterOutput, flatten_samples


def check_reward_nonzero_std(args, group) -> DynamicFilterOutput:
    """Keep a group only if its rewards differ: with group normalisation an all-equal group trains nothing. A
    multi-step agent's episode is a list of step samples (each carrying its episode's reward), so the group is
    flattened the way the trainer groups it."""
    rewards = [sample.get_reward_value(args) for sample in flatten_samples(group)]
    if max(rewards) - min(rewards) > 1e-12:
        return DynamicFilterOutput(keep=True)
    return DynamicFilterOutput(keep=False, reason=f"zero_std_{rewards[0]:g}")
