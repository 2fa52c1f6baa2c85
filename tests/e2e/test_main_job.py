"""The README's main job, as a user runs it: the Combine server on SmolLM2 learns from two judged turns.

Starts `openclaw-combine/run_cpu_smollm2_openclaw_combine.sh` (what `scripts/run_main.sh` runs: trainer +
policy engine + frozen teacher engine + proxy), chats through the proxy with the official `openai` client,
gives feedback in the next messages (a correction, which is both a hint and a -1, then praise, a +1 without
a hint), waits until the two judged turns have trained one step with the Combine loss and the engine
serves the new weights, then stops it with Ctrl-C (SIGINT).
"""

from __future__ import annotations

import httpx
import pytest

from helpers.jobs import healthz, wait_for
from slime.conversation.launch import ConversationJob


@pytest.mark.slow
def test_main_job_serves_judges_and_trains(tmp_path):
    openai = pytest.importorskip("openai")
    job = ConversationJob("openclaw-combine/run_cpu_smollm2_openclaw_combine.sh", "--save-interval", "1000",
                          env={"RUN_DIR": str(tmp_path / "run"), "ROLLOUT_BATCH_SIZE": "2", "PRM_TYPE": "rules"},
                          log_path=tmp_path / "main.log")
    with job:
        client = openai.OpenAI(base_url=job.url + "/v1", api_key="local", max_retries=0,
                               default_headers={"X-Session-Id": "main-job"})
        history = [{"role": "user", "content": "In one sentence: why do plants need sunlight?"}]
        for feedback in ("too long, one sentence please", "thanks, that's perfect", "ok"):
            answer = client.chat.completions.create(model="smollm2", messages=history, max_tokens=24)
            assert answer.model_extra["session_id"] == "main-job"
            history += [{"role": "assistant", "content": answer.choices[0].message.content},
                        {"role": "user", "content": feedback}]
        # two judged turns (hint and -1; +1) fill the batch of 2: one step trains and the engine swaps to version 1
        health = wait_for(lambda: (h := healthz(job.url)) and h.get("weight_version") not in (None, "0") and h,
                          600, job, "a trained weight version")
        assert int(health["weight_version"]) >= 1
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
        assert stats["samples"]["trained"] + stats["samples"]["in_batch"] >= 2
        assert stats["proxy"]["method"] == "combine" and stats["proxy"]["teacher_stats"]["calls"] >= 1
    output = (tmp_path / "main.log").read_text(errors="replace")
    assert job.process.returncode == 0, output[-4000:]  # Ctrl-C is a clean stop
    assert (tmp_path / "run" / "conversations.db").exists()
    assert list((tmp_path / "run" / "ckpt").glob("*")), "no checkpoint written at exit"
