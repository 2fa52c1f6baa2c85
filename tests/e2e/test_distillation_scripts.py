"""The CPU launch scripts of Binary RL and OPD end to end on the tiny model (Combine's is the main job, see
test_main_job.py). For OPD a correction in the next message becomes a hint, the frozen teacher engine scores the
reply under it, and one training step runs with the script's loss (token-level OPD advantages, or the top-K
reverse KL); for Binary RL a judged +1 trains with the PPO policy loss. Then the engine serves the new weights."""

from __future__ import annotations

import json

import httpx
import pytest

from helpers.jobs import healthz, wait_for
from slime.conversation.launch import ConversationJob


@pytest.mark.slow
@pytest.mark.parametrize("script", ["openclaw-rl/run_cpu_smollm2_openclaw_rl.sh",
                                    "openclaw-opd/run_cpu_smollm2_openclaw_opd.sh",
                                    "openclaw-opd/run_cpu_smollm2_openclaw_opd_topk.sh",
                                    "openclaw-combine/run_cpu_smollm2_openclaw_combine_topk.sh"])
def test_cpu_script_trains_on_a_judged_turn(script, tmp_path):
    method = "rl" if "openclaw-rl" in script else ("combine" if "combine" in script else "opd")
    method += "_topk" if "topk" in script else ""  # the registry entry the script runs
    job = ConversationJob(script, "--hf-checkpoint", "tiny", "--save-interval", "1000", log_path=tmp_path / "job.log",
                          env={"RUN_DIR": str(tmp_path / "run"), "ROLLOUT_BATCH_SIZE": "1", "PRM_TYPE": "rules",
                               "DISTILL_TOPK": "5"}, ready_timeout=300)
    with job:
        history = [{"role": "user", "content": "Describe the ocean."}]
        for reply in ("thanks, perfect" if method == "rl" else "too long, one sentence please", "ok"):
            answer = httpx.post(job.url + "/v1/chat/completions", headers={"X-Session-Id": "opd"}, timeout=120,
                                json={"messages": history, "max_tokens": 8}).json()
            history += [answer["choices"][0]["message"], {"role": "user", "content": reply}]
        wait_for(lambda: (healthz(job.url) or {}).get("weight_version") not in (None, "0"), 300, job,
                 "a trained weight version")
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
        assert stats["proxy"]["method"] == method
        assert stats["proxy"]["teacher_stats"].get("calls", 0) == (0 if method == "rl" else 1)
    output = (tmp_path / "job.log").read_text(errors="replace")
    assert job.process.returncode == 0, output[-3000:]
    metrics = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    trained = [m for m in metrics if "train/loss" in m]
    assert trained, metrics
    # the script's loss is what trained: top-K reverse KL, PPO on the advantages, or both (Combine top-K);
    # every script reports a KL: the top-K loss's own, or the KL anchor to the base model the CPU scripts add
    assert "train/kl_loss" in trained[0]
    assert ("train/pg_loss" in trained[0]) == (not script.endswith("opd_topk.sh"))
    assert ("train/topk_kl_loss" in trained[0]) == script.endswith("combine_topk.sh")
    if script.endswith("combine_topk.sh"):
        assert trained[0]["train/topk_kl_loss"] > 0  # the correction's hint reached the loss
