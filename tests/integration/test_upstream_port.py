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


def train(tmp_path, run_dir: Path, *extra: str, rollouts: int, env: dict) -> None:
    from slime.tasks.digits import build_digit_policy, make_prompts

    build_digit_policy()
    prompts = make_prompts(64, seed=0, path=tmp_path / "digits.jsonl")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(REPO / "slime" / "train.py"), "--hf-checkpoint", "tiny-digits", "--prompt-data", str(prompts),
           "--apply-chat-template", "--rollout-batch-size", "4", "--n-samples-per-prompt", "4",
           "--num-rollout", str(rollouts), "--rollout-max-response-len", "4", "--rollout-temperature", "1.0",
           "--custom-rm-path", "slime.tasks.digits.reward", "--lr", "1e-3", "--seed", "1", "--run-dir", str(run_dir),
           "--extra-python-path", str(REPO / "tests" / "helpers"), *extra]
    log = run_dir.with_suffix(".log")
    with open(log, "w") as out:
        done = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=300,
                              env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    assert done.returncode == 0, log.read_text()[-4000:]


def test_a_generate_function_in_upstreams_shape_trains(tmp_path):
    run_dir, calls = tmp_path / "run", tmp_path / "calls.txt"
    train(tmp_path, run_dir, "--custom-generate-function-path", "upstream_generate.generate", rollouts=2,
          env={"UPSTREAM_GENERATE_LOG": str(calls)})
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 * 4 * 4  # every sample of both rollouts went through it
    address, status, prompt_tokens = lines[0].split()
    assert address.startswith("127.0.0.1:") and status in ("completed", "truncated") and int(prompt_tokens) > 0
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "train/weight_version" in s]
    assert [s["train/weight_version"] for s in steps] == [1, 2]
    # the log-probs it copied from the engine's answer are the ones the trainer recomputes
    assert all(s["train/train_rollout_logprob_abs_diff"] < 0.02 for s in steps), steps


def test_a_data_source_and_a_loss_in_upstreams_shape_train_and_resume(tmp_path):
    """A data source with only `save(rollout_id)` / `load(rollout_id)` (before, such a source was neither saved nor
    loaded, and a resumed run served its first prompts again), trained by a custom loss written for upstream's batch
    layout (tests/helpers/upstream_loss.py, `--custom-loss-batch-layout upstream`)."""
    save, events = tmp_path / "ckpt", tmp_path / "source.jsonl"
    flags = ("--data-source-path", "upstream_data_source.PromptsInOrder", "--save", str(save), "--save-interval", "1",
             "--loss-type", "custom_loss", "--custom-loss-function-path", "upstream_loss.combined_policy_loss",
             "--custom-loss-batch-layout", "upstream", "--use-kl-loss", "--kl-loss-coef", "0.01")
    env = {"UPSTREAM_SOURCE_LOG": str(events)}
    train(tmp_path, tmp_path / "first", *flags, rollouts=2, env=env)
    first = [json.loads(line) for line in events.read_text().splitlines()]
    events.unlink()
    steps = [json.loads(line) for line in (tmp_path / "first" / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "train/weight_version" in s]
    assert len(steps) == 2 and all(s["train/upstream_layout_samples"] > 0 for s in steps), steps  # the ported loss
    assert all(s["train/grad_norm"] > 0 and "train/kl_loss" in s for s in steps)
    train(tmp_path, tmp_path / "resumed", *flags, "--load", str(save), rollouts=3, env=env)
    resumed = [json.loads(line) for line in events.read_text().splitlines()]
    assert resumed[0] == {"loaded": 1}  # the checkpoint's rollout id
    served_first = [p for e in first for p in e["served"]]
    served_after = [p for e in resumed[1:] for p in e.get("served", [])]
    assert served_first == list(range(8))
    assert served_after == [8, 9, 10, 11], served_after  # it went on where it stopped (not 0, 1, 2, 3 again)
    assert sorted((save / "rollout").glob("prompts_in_order_*.json"))  # written by the source at each checkpoint
