"""Upstream slime's `slime.rollout.base_types` (the rollout function's outputs), for ported method folders."""

from slime.utils.types import RolloutFnEvalOutput, RolloutFnTrainOutput

__all__ = ["RolloutFnEvalOutput", "RolloutFnTrainOutput"]
