"""The README's main job, as a user runs it: the Combine server on SmolLM2 learns from two judged turns.

Starts `openclaw-combine/run_cpu_smollm2_openclaw_combine.sh` (what `scripts/run_main.sh` runs: trainer +
policy engine + frozen teacher engine + proxy), chats through the proxy with the official `openai` client,
gives feedback in the next messages (a correction, which is both a hint and a -1, then praise, a +1 without
a hint), waits until the two judged turns have trained one step with the Combine loss and the engine
serves the new weights, then stops it with Ctrl-C (SIGINT).
"""

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


def _wait_for(predicate, timeout: float, process: subprocess.Popen, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"main job exited with {process.returncode} while waiting for {what}")
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}")


def _healthz(url: str):
    try:
        response = httpx.get(url + "/healthz", timeout=5)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_main_job_serves_judges_and_trains(tmp_path):
    openai = pytest.importorskip("openai")
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PORT": str(port), "HOST": "127.0.0.1",
           "RUN_DIR": str(tmp_path / "run"), "ROLLOUT_BATCH_SIZE": "2", "PRM_TYPE": "rules"}
    log = open(tmp_path / "main.log", "wb")
    process = subprocess.Popen(["bash", "openclaw-combine/run_cpu_smollm2_openclaw_combine.sh", "--save-interval", "1000"],
                               cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _healthz(url), 600, process, "the proxy")
        client = openai.OpenAI(base_url=url + "/v1", api_key="local", max_retries=0,
                               default_headers={"X-Session-Id": "main-job"})
        history = [{"role": "user", "content": "In one sentence: why do plants need sunlight?"}]
        for feedback in ("too long, one sentence please", "thanks, that's perfect", "ok"):
            answer = client.chat.completions.create(model="smollm2", messages=history, max_tokens=24)
            assert answer.model_extra["session_id"] == "main-job"
            history += [{"role": "assistant", "content": answer.choices[0].message.content},
                        {"role": "user", "content": feedback}]
        # two judged turns (hint and -1; +1) fill the batch of 2: one step trains and the engine swaps to version 1
        health = _wait_for(lambda: (h := _healthz(url)) and h.get("weight_version") not in (None, "0") and h,
                           600, process, "a trained weight version")
        assert int(health["weight_version"]) >= 1
        stats = httpx.get(url + "/v1/stats", timeout=10).json()
        assert stats["samples"]["trained"] + stats["samples"]["in_batch"] >= 2
        assert stats["proxy"]["method"] == "combine" and stats["proxy"]["teacher_stats"]["calls"] >= 1
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in the terminal sends
            try:
                process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()
    output = (tmp_path / "main.log").read_text(errors="replace")
    assert process.returncode == 0, output[-4000:]
    assert (tmp_path / "run" / "conversations.db").exists()
    assert list((tmp_path / "run" / "ckpt").glob("*")), "no checkpoint written at exit"
