"""The SWE loop under torchrun to a trained step: the trainer (2 ranks, the tiny random model, its embedded engine)
starts its own pool server with the `swe` provider over two instances (upstream's training rows, `--input-key text
--metadata-key metadata`), episodes run through the bash loop in real sandboxes, and the samples train.

Pinned: with `--dynamic-history` every step sample is exactly what the engine generated (the trainer's recomputed
log-probs of its ids equal the engine's, |Δlogp| ~ 0, which re-tokenised text would not give), the contexts of one
trajectory extend each other, and the pool server is gone afterwards; one sample per trajectory (no dynamic history)
trains with observations masked. The random model writes no bash block (format errors, reward -1): plumbing, not
learning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.swe.instances import as_training_row, dumps_instance, load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES

REPO = Path(__file__).resolve().parents[2]
_CAP = sb.detect_capability("bwrap")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two instances (of two projects when the set has them) as the provider's JSONL and as training rows."""
    instances = load_instances(DEFAULT_INSTANCES)
    chosen = [instances[0]] + ([i for i in instances if i.repo != instances[0].repo][:1] or instances[1:2])
    folder = tmp_path_factory.mktemp("swe-data")
    (folder / "instances.jsonl").write_text("".join(dumps_instance(i) + "\n" for i in chosen))
    (folder / "train.jsonl").write_text("".join(json.dumps(as_training_row(i)) + "\n" for i in chosen))
    return folder, [i.instance_id for i in chosen]


@pytest.mark.parametrize("mode", ["dynamic-history", "trajectory"])
def test_a_trained_step_through_the_swe_loop(tmp_path, tiny_model_path, data, mode):
    folder, ids = data
    run = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "slime/train.py", "--hf-checkpoint", str(tiny_model_path), "--prompt-data", str(folder / "train.jsonl"),
               "--input-key", "text", "--metadata-key", "metadata",
               "--extra-python-path", "swe-rl",
               "--custom-generate-function-path", "generate_with_swe_remote.generate",
               "--custom-rm-path", "generate_with_swe_remote.reward_func", "--reward-key", "score",
               "--env-provider", "swe", "--env-workers", "1", "--max-turns", "3",
               "--num-rollout", "1", "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
               "--rollout-max-response-len", "12", "--rollout-max-context-len", "2048", "--rollout-temperature", "1.0",
               "--rollout-seed", "3", "--advantage-estimator", "grpo", "--lr", "1e-4",
               "--run-dir", str(run), "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")]
    dynamic = mode == "dynamic-history"
    if dynamic:
        command.append("--dynamic-history")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SWE_INSTANCES": str(folder / "instances.jsonl")}
    env.pop("ENV_SERVER_URL", None)
    log = tmp_path / "train.log"
    with open(log, "w") as out:  # its own process group: a timeout stops torchrun's ranks too
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)
        try:
            code = proc.wait(timeout=480)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail("the run did not finish in 480 s:\n" + log.read_text()[-4000:])
    assert code == 0, log.read_text()[-6000:]
    samples = [json.loads(line) for line in (run / "rollout_0.jsonl").read_text().splitlines()]
    assert {s["metadata"]["instance_id"] for s in samples} == set(ids)
    assert all(s["metadata"].get("exit_status") != "environment_error" for s in samples), samples[0]["metadata"]
    assert all(s["reward"]["score"] == -1.0 and s["metadata"]["patch_source"] == "none" for s in samples)
    trajectories: dict = {}
    for s in samples:
        trajectories.setdefault((s["group_index"], s["index"]), []).append(s)
    assert len(trajectories) == 4  # 2 instances x 2 episodes
    if dynamic:
        for steps in trajectories.values():
            steps.sort(key=lambda s: s["metadata"]["step"])
            assert [s["metadata"]["step"] for s in steps] == [0, 1, 2]
            for s in steps:
                assert s["response_length"] == len(s["rollout_log_probs"]) == 12 and set(s["loss_mask"]) == {1}
            for before, after in zip(steps, steps[1:]):
                assert after["tokens"][:len(before["tokens"])] == before["tokens"]
    else:
        for [s] in trajectories.values():
            spans = s["metadata"]["step_wise"]["step_token_spans"]
            assert len(spans) == 3 and sum(s["loss_mask"]) == 36 and len(s["loss_mask"]) == s["response_length"]
            for a, b in spans:
                assert s["loss_mask"][a:b] == [1] * (b - a)
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if "train/pg_loss" in m]
    assert trained, metrics
    # the trainer's log-probs of the stored ids equal the engine's: the samples hold exactly what was generated
    assert all(m["train/train_rollout_logprob_abs_diff"] < 0.02 for m in trained), \
        [m["train/train_rollout_logprob_abs_diff"] for m in trained]
    pool_state = run / "env_service" / "pool0"
    assert (pool_state / "leases.db").exists()
    assert not (pool_state / "leases").exists() or os.listdir(pool_state / "leases") == []
    survivors = subprocess.run(["pgrep", "-f", "--", f"--state-dir {pool_state}"], capture_output=True, text=True)
    assert survivors.returncode == 1  # the trainer stopped the pool server it started
