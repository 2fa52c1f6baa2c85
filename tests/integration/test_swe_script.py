"""`swe-rl/run_cpu_smollm2_swe.sh` as a user runs it, with the tiny model: the trainer starts its pool server, the
episodes run in the instances' sandboxed repositories, one step trains and a checkpoint is written."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from slime.agentic import sandbox as sb

REPO = Path(__file__).resolve().parents[2]
_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def test_the_cpu_script_trains_a_step_on_real_instances(tmp_path):
    run_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL")}
    env.update(OMP_NUM_THREADS="1", HF_CKPT="tiny", NUM_ROLLOUT="1", ROLLOUT_BATCH_SIZE="1", N_SAMPLES="2",
               MAX_STEPS="2", RUN_DIR=str(run_dir))
    done = subprocess.run(["bash", "swe-rl/run_cpu_smollm2_swe.sh", "--rollout-max-response-len", "32"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollout = next(r for r in rows if "rollout/samples" in r)
    # 2 episodes x 2 steps of the random model: one sample per step, each scored by the sealed evaluation
    assert rollout["rollout/samples"] == 4 and rollout["rollout/raw_reward"] == -1.0
    assert (run_dir / "ckpt" / "iter_0000001").is_dir()
    # the trainer's pool server leased one fresh repository per episode, closed each, and left no work tree behind
    state = run_dir / "env_service" / "pool0"
    with sqlite3.connect(state / "leases.db") as db:
        leases = db.execute("SELECT task_key, close_reason FROM leases").fetchall()
    assert len(leases) == 2 and all(reason == "closed by the client" for _, reason in leases)
    assert not any((state / "leases").iterdir())
