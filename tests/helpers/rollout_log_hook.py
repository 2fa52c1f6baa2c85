"""A `--custom-rollout-log-function-path` in upstream's call shape for the trainer tests: appends one JSON line per
call to $ROLLOUT_LOG_HOOK_FILE and answers $ROLLOUT_LOG_HOOK_RETURNS ("1": it logged the rollout itself)."""

from __future__ import annotations

import json
import os


def record(rollout_id, args, samples, rollout_extra_metrics, rollout_time):
    with open(os.environ["ROLLOUT_LOG_HOOK_FILE"], "a") as out:
        out.write(json.dumps({"rollout_id": rollout_id, "samples": len(samples),
                              "rewards": [s.reward for s in samples], "time": rollout_time,
                              "extra": sorted(rollout_extra_metrics or {})}) + "\n")
    return os.environ.get("ROLLOUT_LOG_HOOK_RETURNS") == "1"
