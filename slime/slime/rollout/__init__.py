"""Rollout side: prompt data sources (`slime.rollout.data_source`) and the default rollout function
(`slime.rollout.default_rollout.generate_rollout`, also reachable as `slime.rollout.sglang_rollout`-style
`--rollout-function-path slime.rollout.default_rollout.generate_rollout`)."""
