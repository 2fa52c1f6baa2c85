"""`gui-rl/run_cpu_smollm2_gui_text.sh` as a user runs it, with the tiny model: the trainer starts its pool server,
each episode runs on its own desktop (Xvfb and the task's app in a sandbox), one step trains and a checkpoint is
written; every lease is closed and no desktop process is left."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from helpers.gui_env import requires_desktop

REPO = Path(__file__).resolve().parents[2]
pytestmark = requires_desktop()


def test_the_cpu_script_trains_a_step_on_real_desktops(tmp_path):
    run_dir = tmp_path / "run"
    prompts = tmp_path / "rows.jsonl"  # one Tk task: the desktop starts in about a second
    prompts.write_text(json.dumps({"prompt": "notes/append-line", "label": "",
                                   "metadata": {"domain": "notes", "example_id": "append-line"}}) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "ENV_SERVER_URL")}
    env.update(OMP_NUM_THREADS="1", HF_CKPT="tiny", NUM_ROLLOUT="1", ROLLOUT_BATCH_SIZE="1", N_SAMPLES="2",
               MAX_STEPS="2", RUN_DIR=str(run_dir), PROMPT_DATA=str(prompts), STEP_JUDGE="rules")
    done = subprocess.run(["bash", "gui-rl/run_cpu_smollm2_gui_text.sh", "--rollout-max-response-len", "24"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollout = next(r for r in rows if "rollout/samples" in r)
    # the random model writes no valid action: 2 episodes end after their parse errors or steps, all unsolved
    assert rollout["rollout/samples"] >= 2 and rollout["rollout/raw_reward"] == -1.0
    assert (run_dir / "ckpt" / "iter_0000001").is_dir()
    state = run_dir / "env_service" / "pool0"
    with sqlite3.connect(state / "leases.db") as db:
        leases = db.execute("SELECT task_key, close_reason FROM leases").fetchall()
    assert len(leases) == 2 and all(reason == "closed by the client" for _, reason in leases)
    assert not any((state / "leases").iterdir())
