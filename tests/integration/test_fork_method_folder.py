"""Forking a method folder works as its README says: copy `openclaw-combine/` somewhere else, give the copy a
judge of its own (a rule that rewards short replies) and a variant of the method (Combine with its rewards
scaled), point the copied CPU script at them, and run it on the tiny model. The new judge's scores and the
variant's samples land in the store, and a training step runs on them."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import httpx
import pytest

from helpers.jobs import healthz, wait_for
from slime.conversation.launch import ConversationJob
from slime.conversation.store import ConversationStore

REPO = Path(__file__).resolve().parents[2]

SHORT_REPLY_JUDGE = '''
"""A reward judge: +1 for a reply of at most `max_words` words, -1 for a longer one."""

from slime.conversation.judges.base import Judgement, Vote


class ShortReplyJudge:
    name = "short-reply"

    def __init__(self, max_words=40):
        self.max_words = max_words

    async def judge(self, turn):
        words = len(str(turn.response_message.get("content") or "").split())
        score = 1 if words <= self.max_words else -1
        return Judgement(score=float(score), votes=[Vote(score=score, rationale=f"{words} words", source=self.name)],
                         judge=self.name)

    async def aclose(self):
        pass


def build():
    return ShortReplyJudge()
'''

SCALED_COMBINE = '''
"""Combine, with every reward scaled by `scale` (the teacher signal is unchanged)."""

from dataclasses import replace

from openclaw_combine_method import Combine  # the fork's own copy of the method


class ScaledCombine(Combine):
    name = "combine-scaled"

    def __init__(self, scale=0.5):
        self.scale = scale

    def decide(self, turn, signals):
        decision = super().decide(turn, signals)
        return replace(decision, reward=decision.reward * self.scale)


def build(scale=0.5):
    return ScaledCombine(scale)
'''


def _fork(destination: Path) -> Path:
    """What a researcher does: copy the folder, add two files, change two flags of its CPU script."""
    shutil.copytree(REPO / "openclaw-combine", destination)
    (destination / "short_reply_judge.py").write_text(textwrap.dedent(SHORT_REPLY_JUDGE))
    (destination / "scaled_combine.py").write_text(textwrap.dedent(SCALED_COMBINE))
    script = destination / "run_cpu_smollm2_openclaw_combine.sh"
    text = script.read_text()
    assert text.count("--conversation-method combine ") == 1
    script.write_text(text.replace("--conversation-method combine ",
                                   "--conversation-method scaled_combine:build --prm-type short_reply_judge:build "))
    return script


@pytest.mark.slow
def test_a_copied_folder_with_its_own_judge_and_method_trains(tmp_path):
    script = _fork(tmp_path / "my-experiment")
    run = tmp_path / "run"
    job = ConversationJob(script, "--hf-checkpoint", "tiny", "--save-interval", "1000", log_path=tmp_path / "job.log",
                          env={"SLIME_ROOT": str(REPO), "RUN_DIR": str(run), "ROLLOUT_BATCH_SIZE": "2"},
                          ready_timeout=300)
    with job:
        history = [{"role": "user", "content": "Name a colour."}]
        for reply in ("too long, one word please", "thanks", "ok"):
            answer = httpx.post(job.url + "/v1/chat/completions", headers={"X-Session-Id": "fork"}, timeout=120,
                                json={"messages": history, "max_tokens": 6}).json()
            history += [answer["choices"][0]["message"], {"role": "user", "content": reply}]
        wait_for(lambda: (healthz(job.url) or {}).get("weight_version") not in (None, "0"), 300, job,
                 "a trained weight version")
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
        assert stats["proxy"]["method"] == "combine-scaled" and stats["proxy"]["judge"] == "short-reply"
    output = (tmp_path / "job.log").read_text(errors="replace")
    assert job.process.returncode == 0, output[-3000:]

    settings = json.loads((run / "conversation_settings.json").read_text())
    assert settings["conversation_method"] == "scaled_combine:build"
    assert settings["python_path"] == [str((tmp_path / "my-experiment").resolve())]
    store = ConversationStore(run / "conversations.db")
    try:
        judged = [t for t in store.recent_turns(20) if t.turn_type == "main" and t.judgement]
        assert len(judged) >= 2
        for turn in judged:  # the fork's judge scored every turn (+1: six tokens are a short reply)
            assert turn.judgement["judge"] == "combine-scaled:rules+short-reply"
            assert turn.judgement["extras"]["prm"]["judge"] == "short-reply"
            sample = store.get_sample(turn.id)
            assert sample is not None and sample["metadata"]["method"] == "combine-scaled"
            assert sample["reward"]["score"] == 0.5  # the variant's scaled reward
    finally:
        store.close()
    metrics = [json.loads(line) for line in open(run / "metrics.jsonl")]
    trained = [m for m in metrics if "train/loss" in m]
    assert trained and "train/opd_advantage_mean" in trained[0]  # Combine's loss, chosen with the method
