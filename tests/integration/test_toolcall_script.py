"""`toolcall-rl/run_cpu_smollm2_toolcall.sh` as a user runs it, on the tiny model: rollouts through the tool-call
loop (engine, parser, observations, reward), then trained steps, with one sample per trajectory and with dynamic
history. The random model never calls a tool (its trajectories end on the turn budget), so every reward is the
same and every advantage 0: this pins the plumbing from the script to a trained step, not learning."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("dynamic", ["0", "1"])
def test_the_cpu_script_runs_the_loop_and_trains(tmp_path, dynamic):
    run = tmp_path / "run"
    env = {**os.environ, "RUN_DIR": str(run), "NUM_ROLLOUT": "2", "ROLLOUT_BATCH_SIZE": "2", "N_SAMPLES": "2",
           "MAX_TURNS": "2", "DYNAMIC_HISTORY": dynamic, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "toolcall-rl/run_cpu_smollm2_toolcall.sh", "--hf-checkpoint", "tiny",
                           "--rollout-max-response-len", "16", "--save-interval", "1000",
                           # stop strings the random model soon writes: turns end on "stop", so trajectories mostly
                           # take both turns, with the environment's observation in between
                           "--rollout-stop", " ", "e", "a", "t",
                           "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = [json.loads(line) for line in (run / "rollout_0.jsonl").read_text().splitlines()]
    trajectories = {(s["group_index"], s["index"]) for s in samples}
    assert len(trajectories) == 4  # 2 problems x 2 samples
    for s in samples:
        assert s["reward"]["score"] == pytest.approx(-1.1) and s["metadata"]["answer"] is None
        assert s["label"] and len(s["loss_mask"]) == s["response_length"]
    turns = {(s["group_index"], s["index"]): s["metadata"]["turns"] for s in samples}
    assert any(t == 2 for t in turns.values()), turns  # most turns end on a stop string, not the 8-token cap
    if dynamic == "1":
        assert len(samples) == sum(turns.values()) and all(set(s["loss_mask"]) == {1} for s in samples)
    else:
        # the environment's observation between two turns is in the sample, with loss mask 0
        assert all((0 in s["loss_mask"]) == (s["metadata"]["turns"] == 2) for s in samples)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/pg_loss" in m for m in metrics), metrics
