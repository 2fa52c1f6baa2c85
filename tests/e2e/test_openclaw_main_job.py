"""The stock OpenClaw client against the README's main job on its default model, as a user would point it.

`openclaw-combine/run_cpu_smollm2_openclaw_combine.sh` (what `scripts/run_main.sh` runs: SmolLM2-135M-Instruct with
an 8,192-token context, trainer + policy and teacher engines + proxy), and `openclaw agent --local` configured by
`slime.conversation.openclaw_config` exactly as `python -m slime.conversation openclaw-config` writes it for this
server (the lean profile: OpenClaw's full prompt is ~14k SmolLM2 tokens and does not fit). Two turns of one
session; the second is praise, so the first is judged +1, trains one step (batch of 1) and the engine serves the
new weights. About 2-3 minutes on 2 CPU cores.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from e2e.openclaw_harness import OpenClawClient, openclaw_available, openclaw_skip_reason
from helpers.jobs import healthz, wait_for
from slime.conversation.launch import ConversationJob
from slime.conversation.openclaw_config import describe_server, openclaw_config
from slime.conversation.store import ConversationStore

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(not openclaw_available(), reason=openclaw_skip_reason()),
]


def test_openclaw_on_the_main_job_is_judged_and_trained(tmp_path, record_property):
    run = tmp_path / "run"
    job = ConversationJob("openclaw-combine/run_cpu_smollm2_openclaw_combine.sh", "--save-interval", "1000",
                          env={"RUN_DIR": str(run), "ROLLOUT_BATCH_SIZE": "1", "PRM_TYPE": "rules"},
                          log_path=tmp_path / "main.log")
    session = f"e2e-main-{uuid.uuid4().hex[:8]}"
    with job:
        model_id, context = describe_server(job.url)
        assert context == 8192  # the CPU default's context: the reason for the lean profile
        assert "tools" in openclaw_config(job.url, model_id, context_window=context)  # auto picks lean here
        # a short reply cap keeps the test quick; the bench (bench/openclaw_cpu_turns.py) measures 512
        client = OpenClawClient(job.url, None, model_id, tmp_path / "openclaw", context_window=context,
                                max_tokens=48, lean=None, timeout=600)
        turns = []
        for i, message in enumerate(("Hi! Write a haiku about the sea.", "thanks, that is perfect"), start=1):
            turn = client.run_turn(session, message).check()
            record_property(f"openclaw_main_turn{i}_wall_s", round(turn.wall_s, 1))
            print(f"turn {i}: {turn.wall_s:.1f} s, reply {turn.reply_text[:80]!r}")
            assert turn.reply_text.strip(), turn.describe()
            turns.append(turn)
        # turn 1 judged +1 from the praise -> a batch of 1 -> one step -> the engine serves version >= 1
        health = wait_for(lambda: (h := healthz(job.url)) and h.get("weight_version") not in (None, "0") and h,
                          600, job, "a trained weight version")
        assert int(health["weight_version"]) >= 1
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
    assert job.process.returncode == 0, (tmp_path / "main.log").read_text(errors="replace")[-4000:]

    store = ConversationStore(run / "conversations.db")
    try:
        main = sorted((t for t in store.recent_turns(50) if t.session_id == f"openclaw:{session}"
                       and t.turn_type == "main"), key=lambda t: t.turn_num)
        assert len(main) >= 2, [(t.session_id, t.turn_type) for t in store.recent_turns(50)]
        first = main[0]
        # the lean profile's request fits the 8k context with room for history and the reply
        assert 1000 < len(first.prompt_ids) < 4096, len(first.prompt_ids)
        assert first.judgement and first.judgement["score"] > 0, first.judgement
        assert store.sample_state(first.id) == "trained"
    finally:
        store.close()
    assert stats["samples"]["trained"] + stats["samples"]["in_batch"] >= 1, stats
