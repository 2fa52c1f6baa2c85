"""`terminal-rl/run_cpu_smollm2_terminal.sh` as a user runs it, on the tiny model: the trainer starts its own pool
server (the terminal provider), episodes run through the agent loop (engine, parser, shell tools, the task's
tests), one sample per turn is trained, and the pool server is gone when the trainer exits. The random model never
writes a tool call, so every episode ends on its first turn with the tests failing (reward -1): this pins the
plumbing from the script to a trained step, not learning."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from slime.agentic import sandbox as sb

REPO = Path(__file__).resolve().parents[2]
_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def test_the_cpu_script_runs_episodes_and_trains(tmp_path):
    run = tmp_path / "run"
    # two rollouts: each runs in its own event loop, whose id a later loop may reuse (the env client must not be)
    env = {**os.environ, "RUN_DIR": str(run), "NUM_ROLLOUT": "2", "ROLLOUT_BATCH_SIZE": "2", "N_SAMPLES": "2",
           "EVAL_INTERVAL": "1000", "OMP_NUM_THREADS": "1"}
    env.pop("ENV_SERVER_URL", None)
    done = subprocess.run(["bash", "terminal-rl/run_cpu_smollm2_terminal.sh", "--hf-checkpoint", "tiny",
                           "--rollout-max-response-len", "16", "--save-interval", "1000",
                           "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = [json.loads(line) for rollout in (0, 1)
               for line in (run / f"rollout_{rollout}.jsonl").read_text().splitlines()]
    assert len({(s["group_index"], s["index"]) for s in samples}) == 8  # 2 rollouts x 2 tasks x 2 episodes
    assert all(s["metadata"]["stop_reason"] != "environment_error" for s in samples)
    assert any(s["metadata"]["evaluation"] for s in samples)  # most episodes end on an answer and are tested
    for s in samples:
        meta = s["metadata"]
        assert s["prompt"]["task_name"] and meta["task_key"].startswith(s["prompt"]["task_name"] + ":")
        if meta["status"] == "failed":  # the random model's turn can be blank: FAILED, not tested, not trained
            assert meta["stop_reason"] == "empty_final_message" and meta["evaluation"] is None
            assert s["remove_sample"] and s["reward"]["score"] == -1.0
        else:
            assert meta["evaluation"]["total"] >= 3 and meta["evaluation"]["passed"] < meta["evaluation"]["total"]
        assert s["reward"]["score"] == pytest.approx(2 * meta["accuracy"] - 1)
        assert len(s["loss_mask"]) == s["response_length"] == 16 and set(s["loss_mask"]) == {1}
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert any("train/pg_loss" in m for m in metrics), metrics
    pool_state = run / "env_service" / "pool0"
    assert (pool_state / "leases.db").exists() and os.listdir(pool_state / "leases") == []
    survivors = subprocess.run(["pgrep", "-f", "--", f"--state-dir {pool_state}"], capture_output=True, text=True)
    assert survivors.returncode == 1 and survivors.stdout == ""  # the trainer stopped the pool server it started


def test_the_sft_warm_start_trains_on_the_demonstrations_and_evaluates_through_the_loop(tmp_path):
    run = tmp_path / "sft"
    env = {**os.environ, "RUN_DIR": str(run), "NUM_ROLLOUT": "2", "BATCH": "2", "EVAL": "1", "OMP_NUM_THREADS": "1"}
    env.pop("ENV_SERVER_URL", None)
    done = subprocess.run(["bash", "terminal-rl/run_cpu_smollm2_terminal_sft.sh", "--hf-checkpoint", "tiny",
                           "--eval-max-response-len", "8"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    losses = [m["train/loss"] for m in metrics if "train/loss" in m]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    evals = [m for m in metrics if "eval/heldout/acc" in m]
    assert len(evals) == 2  # before training and after the last step, through the terminal loop (9 tasks)
    assert (run / "ckpt" / "iter_0000002" / "model").is_dir()


def test_eval_loop_registers_the_loop_and_evaluates_nothing(tmp_path):
    """EVAL=loop (a warm start continued by bench/learning_protocol.py whose evaluation runs elsewhere): the setting's
    loop flags are accepted by the trainer's parser, and no `--eval-interval` is set, so nothing is evaluated."""
    def dry(value):
        env = {**os.environ, "RUN_DIR": str(tmp_path / "sft"), "NUM_ROLLOUT": "5", "EVAL": value}
        env.pop("ENV_SERVER_URL", None)
        return subprocess.run(["bash", "terminal-rl/run_cpu_smollm2_terminal_sft.sh", "--dry-run",
                               "--hf-checkpoint", "tiny", "--terminal-tools", "lean"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)

    for value, interval in (("1", True), ("loop", False)):
        done = dry(value)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert ("--eval-interval 5" in done.stdout) is interval and "--eval-prompt-data heldout" in done.stdout
    done = dry("0")  # no loop registered: the loop's own flag is unknown to the parser
    assert done.returncode != 0 and "--terminal-tools" in done.stderr
