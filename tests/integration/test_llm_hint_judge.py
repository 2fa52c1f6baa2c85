"""LLMHintJudge against real engine processes: the random tiny model (unparseable output, timeouts) and a
tiny model fine-tuned, with helpers.memorised_model (the PRM judge model's recipe), to answer two hint prompts: one with `\\boxed{1}` and
a hint, one with `\\boxed{-1}` (the full path through the real prompt, chat template and sampling)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from helpers.memorised_model import EOS, build_memorised_model

from slime.conversation.judges import LLMHintJudge, RulesHintJudge, TurnForJudge, build_hint_judge

REQUEST = [{"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] What is the weather in Paris?"}]
ANSWER = {"role": "assistant", "content": "It is sunny and 21 C in Paris."}
# a terse clarification no rule rewrites, so a rules+llm cascade has to ask the model
HINTED_TURN = TurnForJudge("s1", 1, REQUEST, ANSWER,
                           [{"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] hmm. Paris, Texas."}])
PLAIN_TURN = TurnForJudge("s1", 1, REQUEST, ANSWER,
                          [{"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] thanks, that is perfect!"}])
HINT = "The user means Paris, Texas (USA), not Paris, France; give the weather there."
HINTED_ANSWER = f"The user names another Paris. \\boxed{{1}}\n[HINT_START]{HINT}[HINT_END]"
PLAIN_ANSWER = "The user is satisfied; nothing new. \\boxed{-1}"


def build_hint_model() -> Path:
    judge = LLMHintJudge("http://127.0.0.1:9")  # only to render prompts exactly as the judge sends them
    examples = [(judge.prompt(HINTED_TURN), HINTED_ANSWER + EOS), (judge.prompt(PLAIN_TURN), PLAIN_ANSWER + EOS)]
    return build_memorised_model("hint-judge-model", examples)


@pytest.fixture(scope="module")
def hint_engine(tmp_path_factory):
    from slime.engine.launch import EngineProcess

    log = tmp_path_factory.mktemp("hint-engine") / "engine.log"
    with EngineProcess(build_hint_model(), log_path=log, ready_timeout=120) as server:
        yield server


def test_full_path_accepts_one_hint_and_rejects_the_other(hint_engine):
    async def run():
        judge = build_hint_judge("llm", engine_url=hint_engine.url, m=3, temperature=0.6, max_new_tokens=96,
                                 timeout=60)
        try:
            return await asyncio.gather(judge.hint(HINTED_TURN), judge.hint(PLAIN_TURN)), dict(judge.stats)
        finally:
            await judge.aclose()

    (hinted, plain), stats = asyncio.run(run())
    assert hinted.accepted and not hinted.failed and hinted.judge == "llm"
    assert hinted.hint == HINT
    assert [v.score for v in hinted.votes] == [1, 1, 1] and all(v.rationale == HINTED_ANSWER for v in hinted.votes)
    assert hinted.extras["candidates"] == [0, 1, 2] and hinted.extras["chosen"] == 0  # equal lengths: first
    assert not plain.accepted and not plain.failed and plain.hint == ""
    assert [v.score for v in plain.votes] == [-1, -1, -1]
    assert stats == {"calls": 2, "votes": 6, "failures": 0, "timeouts": 0, "unparseable": 0, "accepted": 1}


def test_rules_then_llm_cascade(hint_engine):
    async def run():
        judge = build_hint_judge("rules+llm", engine_url=hint_engine.url, m=1, max_new_tokens=96)
        corrected = TurnForJudge("s1", 1, REQUEST, ANSWER, [{"role": "user", "content": "in Fahrenheit please"}])
        try:
            return await judge.hint(corrected), await judge.hint(HINTED_TURN), judge.judges[1].stats["votes"]
        finally:
            await judge.aclose()

    by_rules, by_llm, llm_votes = asyncio.run(run())
    assert by_rules.accepted and by_rules.hint == "Use degrees Fahrenheit." and by_rules.extras["decided_by"] == "rules"
    assert by_llm.accepted and by_llm.hint == HINT and by_llm.extras["decided_by"] == "llm"
    assert [v.source for v in by_llm.votes] == ["rules", "llm"] and llm_votes == 1  # the LLM ran only once
    assert asyncio.run(RulesHintJudge().hint(HINTED_TURN)).accepted is False  # the rules alone find nothing


def test_random_output_is_unparseable_and_not_accepted(engine_server):
    async def run():
        judge = LLMHintJudge(engine_server.url, m=3, max_new_tokens=16, seed=1)
        try:
            return await judge.hint(HINTED_TURN), dict(judge.stats)
        finally:
            await judge.aclose()

    result, stats = asyncio.run(run())
    assert not result.accepted and result.failed and result.hint == ""
    assert len(result.votes) == 3
    for vote in result.votes:
        assert vote.score is None and vote.error == "unparseable" and vote.rationale  # raw text kept
    assert stats == {"calls": 1, "votes": 3, "failures": 0, "timeouts": 0, "unparseable": 3, "accepted": 0}


def test_timeout_fails_votes_fast(engine_server):
    async def run():
        judge = LLMHintJudge(engine_server.url, m=3, timeout=0.05, max_new_tokens=1500,
                             extra_body={"ignore_eos": True})
        started = time.monotonic()
        try:
            return await judge.hint(HINTED_TURN), time.monotonic() - started, dict(judge.stats)
        finally:
            await judge.aclose()

    result, elapsed, stats = asyncio.run(run())
    assert elapsed < 1.0  # votes run concurrently, each cut at ~0.05 s
    assert result.failed and not result.accepted
    assert [v.error for v in result.votes] == ["timeout"] * 3
    assert stats["timeouts"] == 3 and stats["failures"] == 3 and stats["accepted"] == 0
