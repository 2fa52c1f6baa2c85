"""Upstream's method-folder interfaces through the real trainer: a generate function in OpenClaw-RL's shape
(tests/helpers/upstream_generate.py) drives the rollouts of `slime/train.py` (2-process torchrun, the embedded
engine, the tiny digit policy), and the samples it fills train."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_generate_function_in_upstreams_shape_trains(tmp_path):
    from slime.tasks.digits import build_digit_policy, make_prompts

    build_digit_policy()
    prompts = make_prompts(64, seed=0, path=tmp_path / "digits.jsonl")
    run_dir, calls = tmp_path / "run", tmp_path / "calls.txt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(REPO / "slime" / "train.py"), "--hf-checkpoint", "tiny-digits", "--prompt-data", str(prompts),
           "--apply-chat-template", "--rollout-batch-size", "4", "--n-samples-per-prompt", "4", "--num-rollout", "2",
           "--rollout-max-response-len", "4", "--rollout-temperature", "1.0", "--custom-rm-path",
           "slime.tasks.digits.reward", "--lr", "1e-3", "--seed", "1", "--run-dir", str(run_dir),
           "--extra-python-path", str(REPO / "tests" / "helpers"),
           "--custom-generate-function-path", "upstream_generate.generate"]
    log = tmp_path / "train.log"
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "UPSTREAM_GENERATE_LOG": str(calls)})
    assert done.returncode == 0, log.read_text()[-4000:]
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 * 4 * 4  # every sample of both rollouts went through it
    address, status, prompt_tokens = lines[0].split()
    assert address.startswith("127.0.0.1:") and status in ("completed", "truncated") and int(prompt_tokens) > 0
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "train/weight_version" in s]
    assert [s["train/weight_version"] for s in steps] == [1, 2]
    # the log-probs it copied from the engine's answer are the ones the trainer recomputes
    assert all(s["train/train_rollout_logprob_abs_diff"] < 0.02 for s in steps), steps
