"""LLMJudge against real engine processes: the random tiny model (unparseable output, timeouts, errors,
the concurrency bound) and a tiny model fine-tuned to answer two PRM prompts with `\\boxed{1}` and
`\\boxed{-1}` (the full scoring path, through the real prompt, chat template and sampling)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from helpers.memorised_model import EOS, build_memorised_model
from slime.conversation.judges import LLMJudge, TurnForJudge, build_judge

WEATHER_REQUEST = [{"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] What is the weather in Paris?"}]
WEATHER_ANSWER = {"role": "assistant", "content": "It is sunny and 21 C in Paris."}
POSITIVE_TURN = TurnForJudge("s1", 1, WEATHER_REQUEST, WEATHER_ANSWER,
                             [{"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] thanks, that is perfect!"}])
NEGATIVE_TURN = TurnForJudge("s1", 1, WEATHER_REQUEST, WEATHER_ANSWER,
                             [{"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] no, I meant Paris, Texas"}])
POSITIVE_ANSWER = "(a) The user is satisfied and thanks the assistant. \\boxed{1}"
NEGATIVE_ANSWER = "(b) The user corrects the city, so the answer missed. \\boxed{-1}"


# --------------------------------------------------------------------------------------------------
# A tiny "judge model": memorises the judge's answers to two PRM prompts (cached, ~10 s to build)
# --------------------------------------------------------------------------------------------------


def _examples() -> list[tuple[list[dict], str]]:
    judge = LLMJudge("http://127.0.0.1:9")  # only to render prompts exactly as the judge sends them
    return [(judge.prompt(POSITIVE_TURN), POSITIVE_ANSWER + EOS), (judge.prompt(NEGATIVE_TURN), NEGATIVE_ANSWER + EOS)]


def build_judge_model() -> Path:
    return build_memorised_model("judge-model", _examples())


@pytest.fixture(scope="module")
def judge_engine(tmp_path_factory):
    from slime.engine.launch import EngineProcess

    log = tmp_path_factory.mktemp("judge-engine") / "engine.log"
    with EngineProcess(build_judge_model(), log_path=log, ready_timeout=120) as server:
        yield server


# --------------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------------


def test_full_path_scores_positive_and_negative(judge_engine):
    async def run():
        judge = build_judge("llm", engine_url=judge_engine.url, m=3, temperature=0.6, max_new_tokens=64, timeout=60)
        try:
            return await asyncio.gather(judge.judge(POSITIVE_TURN), judge.judge(NEGATIVE_TURN)), dict(judge.stats)
        finally:
            await judge.aclose()

    (positive, negative), stats = asyncio.run(run())
    assert positive.score == 1.0 and positive.judge == "llm" and not positive.failed
    assert [v.score for v in positive.votes] == [1, 1, 1] and all(v.source == "llm" for v in positive.votes)
    assert positive.rationale == POSITIVE_ANSWER and all(v.seconds > 0 for v in positive.votes)
    assert negative.score == -1.0 and negative.rationale == NEGATIVE_ANSWER
    assert [v.score for v in negative.votes] == [-1, -1, -1]
    assert stats == {"calls": 2, "votes": 6, "failures": 0, "timeouts": 0, "unparseable": 0}


def test_random_output_is_unparseable_and_neutral(engine_server):
    async def run():
        judge = LLMJudge(engine_server.url, m=3, max_new_tokens=16, seed=1)
        try:
            return await judge.judge(POSITIVE_TURN), dict(judge.stats)
        finally:
            await judge.aclose()

    result, stats = asyncio.run(run())
    assert result.score == 0.0 and result.failed and result.rationale == ""
    assert len(result.votes) == 3
    for vote in result.votes:
        assert vote.score is None and vote.error == "unparseable" and vote.rationale  # raw text kept
    assert stats == {"calls": 1, "votes": 3, "failures": 0, "timeouts": 0, "unparseable": 3}


def test_timeout_fails_votes_fast(engine_server):
    async def run():
        # ignore_eos: the random model would otherwise sometimes stop early and answer in time
        judge = LLMJudge(engine_server.url, m=3, timeout=0.05, max_new_tokens=1500, extra_body={"ignore_eos": True})
        started = time.monotonic()
        try:
            return await judge.judge(POSITIVE_TURN), time.monotonic() - started, dict(judge.stats)
        finally:
            await judge.aclose()

    result, elapsed, stats = asyncio.run(run())
    assert elapsed < 1.0  # votes run concurrently, each cut at ~0.05 s
    assert result.failed and result.score == 0.0
    assert [v.error for v in result.votes] == ["timeout"] * 3 and all(v.seconds < 0.5 for v in result.votes)
    assert stats["timeouts"] == 3 and stats["failures"] == 3


def test_engine_errors_are_failed_votes(engine_server):
    async def run():
        # a real 400 from the engine: it rejects logit_bias
        rejected = LLMJudge(engine_server.url, m=2, extra_body={"logit_bias": {"1": 5}})
        # and nothing listening at all (connection refused, after the client's retries)
        unreachable = LLMJudge("http://127.0.0.1:9", m=2, timeout=30)
        try:
            return (await rejected.judge(POSITIVE_TURN), dict(rejected.stats),
                    await unreachable.judge(POSITIVE_TURN), dict(unreachable.stats))
        finally:
            await rejected.aclose()
            await unreachable.aclose()

    rejected, rejected_stats, unreachable, unreachable_stats = asyncio.run(run())
    for result, stats in ((rejected, rejected_stats), (unreachable, unreachable_stats)):
        assert result.failed and result.score == 0.0
        assert all(v.score is None and v.error.startswith("engine error: EngineError") for v in result.votes)
        assert stats["failures"] == 2 and stats["timeouts"] == 0
    assert "400" in rejected.votes[0].error and "logit_bias" in rejected.votes[0].error


def test_concurrency_bound_is_shared_by_all_turns(engine_server):
    in_flight = peak = 0
    seeds = []

    async def run():
        judge = LLMJudge(engine_server.url, m=3, max_concurrency=2, max_new_tokens=48,
                         extra_body={"ignore_eos": True})
        real_chat = judge._client.chat

        async def counted_chat(body):  # observes the real engine calls; does not replace them
            nonlocal in_flight, peak
            seeds.append(body["seed"])
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                return await real_chat(body)
            finally:
                in_flight -= 1

        judge._client.chat = counted_chat
        try:
            turns = (POSITIVE_TURN, NEGATIVE_TURN, POSITIVE_TURN)
            results = await asyncio.gather(*(judge.judge(turn) for turn in turns))
            return results, dict(judge.stats)
        finally:
            await judge.aclose()

    results, stats = asyncio.run(run())
    assert peak == 2  # reached, never exceeded
    assert stats["calls"] == 3 and stats["votes"] == 9 and stats["failures"] == 0
    assert all(len(r.votes) == 3 for r in results)
    assert len(set(seeds)) == 9  # every vote is a different sample
