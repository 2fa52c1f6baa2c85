"""Rollout side: prompt data sources (`slime.rollout.data_source`) and the default rollout function
(`slime.rollout.default_rollout.generate_rollout`, also reachable as `slime.rollout.sglang_rollout`-style
`--rollout-function-path slime.rollout.default_rollout.generate_rollout`)."""


class RolloutInterrupted(Exception):
    """Raised by a rollout function that was waiting (e.g. for live conversations) when a stop was requested;
    the training loop then stops cleanly instead of treating it as a failure."""
