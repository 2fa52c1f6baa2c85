"""`--custom-rm-path length_reward.reward` (with `--extra-python-path tests/helpers`): 1 for a response of an odd
number of characters, else 0. A random tiny model's samples differ in length, so GRPO groups have a spread and every
step changes the weights: what tests of the weight path need (the digit task's exact match would score a random
model's samples all 0, and a step without advantages may leave the policy as it was)."""

from __future__ import annotations


async def reward(args, sample, **kwargs) -> float | list[float]:
    if isinstance(sample, list):
        return [float(len(s.response or "") % 2) for s in sample]
    return float(len(sample.response or "") % 2)
