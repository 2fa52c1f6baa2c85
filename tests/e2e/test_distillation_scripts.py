"""The CPU launch scripts of Binary RL and OPD end to end on the tiny model (Combine's is the main job, see
test_main_job.py). For OPD a correction in the next message becomes a hint, the frozen teacher engine scores the
reply under it, and one training step runs with the script's loss (token-level OPD advantages, or the top-K
reverse KL); for Binary RL a judged +1 trains with the PPO policy loss. Then the engine serves the new weights."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from slime.engine.launch import free_port

REPO = Path(__file__).resolve().parents[2]


def _healthz(url):
    try:
        response = httpx.get(url + "/healthz", timeout=5)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("script", ["openclaw-rl/run_cpu_smollm2_openclaw_rl.sh",
                                    "openclaw-opd/run_cpu_smollm2_openclaw_opd.sh",
                                    "openclaw-opd/run_cpu_smollm2_openclaw_opd_topk.sh"])
def test_cpu_script_trains_on_a_judged_turn(script, tmp_path):
    method = "rl" if "openclaw-rl" in script else "opd"
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PORT": str(port), "HOST": "127.0.0.1",
           "RUN_DIR": str(tmp_path / "run"), "ROLLOUT_BATCH_SIZE": "1", "PRM_TYPE": "rules", "DISTILL_TOPK": "5"}
    log = open(tmp_path / "job.log", "wb")
    job = subprocess.Popen(["bash", script, "--hf-checkpoint", "tiny", "--save-interval", "1000"], cwd=REPO, env=env,
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while not _healthz(url):
            assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "job.log").read_text()[-3000:]
            time.sleep(1)
        history = [{"role": "user", "content": "Describe the ocean."}]
        for reply in ("too long, one sentence please" if method == "opd" else "thanks, perfect", "ok"):
            answer = httpx.post(url + "/v1/chat/completions", headers={"X-Session-Id": "opd"}, timeout=120,
                                json={"messages": history, "max_tokens": 8}).json()
            history += [answer["choices"][0]["message"], {"role": "user", "content": reply}]
        deadline = time.monotonic() + 300
        while (_healthz(url) or {}).get("weight_version") in (None, "0"):
            assert job.poll() is None and time.monotonic() < deadline, (tmp_path / "job.log").read_text()[-3000:]
            time.sleep(1)
        stats = httpx.get(url + "/v1/stats", timeout=10).json()
        assert stats["proxy"]["method"] == method
        assert stats["proxy"]["teacher_stats"].get("calls", 0) == (1 if method == "opd" else 0)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGINT)
            try:
                job.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
        log.close()
    output = (tmp_path / "job.log").read_text(errors="replace")
    assert job.returncode == 0, output[-3000:]
    import json

    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    trained = [m for m in metrics if "train/loss" in m]
    assert trained, metrics
    # the script's loss is what trained: top-K reverse KL, or PPO on teacher - old advantages
    assert ("train/kl_loss" in trained[0]) == script.endswith("_topk.sh")
    assert ("train/pg_loss" in trained[0]) == (not script.endswith("_topk.sh"))
