"""Every numeric component of dict rewards becomes a curve (`rollout/reward/<key>`, `eval/<name>/<key>`): the mean over
the samples that have it, bools as 0/1; scalar rewards and non-numeric components add nothing."""

from __future__ import annotations

from slime.rollout.default_rollout import _reward_component_means
from slime.utils.types import Sample


def test_component_means():
    samples = [Sample(reward={"score": 1.0, "acc": 1.0, "tool_call": True, "note": "x"}),
               Sample(reward={"score": -1.1, "acc": 0.0, "tool_call": False}),
               Sample(reward={"score": 0.5}),
               Sample(reward=0.3)]
    assert _reward_component_means("eval/heldout", samples) == {
        "eval/heldout/acc": 0.5, "eval/heldout/score": (1.0 - 1.1 + 0.5) / 3, "eval/heldout/tool_call": 0.5}
    assert _reward_component_means("rollout/reward", [Sample(reward=1.0)]) == {}
