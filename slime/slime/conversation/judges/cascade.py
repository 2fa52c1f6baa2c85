"""Judges in order, cheapest and most certain first: the first non-zero score decides.

Typical use is `rules+embedding` (explicit feedback, then meaning) or `rules+llm`, so the expensive
judge only runs when the cheap one had no opinion. Every vote of every judge that ran is kept, so the
record shows why later judges were (or were not) consulted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from slime.conversation.judges.base import Judge, Judgement, TurnForJudge, Vote

__all__ = ["CascadeJudge"]


class CascadeJudge:
    def __init__(self, judges: Sequence[Judge]):
        if not judges:
            raise ValueError("a cascade needs at least one judge")
        self.judges = list(judges)
        self.name = "+".join(_name(judge) for judge in self.judges)

    async def judge(self, turn: TurnForJudge) -> Judgement:
        votes: list[Vote] = []
        ran: list[Judgement] = []
        for judge in self.judges:
            judgement = await _judge_safely(judge, turn)
            ran.append(judgement)
            votes.extend(judgement.votes)
            if judgement.score != 0:
                return Judgement(score=judgement.score, votes=votes, judge=self.name, rationale=judgement.rationale,
                                 extras=_extras(ran, decided_by=judgement.judge))
        return Judgement(score=0.0, votes=votes, judge=self.name, failed=all(j.failed for j in ran),
                         extras=_extras(ran, decided_by=None))

    async def aclose(self) -> None:
        errors = []
        for judge in self.judges:
            try:
                await judge.aclose()
            except Exception as exc:  # close the rest anyway, then report
                errors.append(exc)
        if errors:
            raise errors[0]


def _name(judge) -> str:
    return getattr(judge, "name", type(judge).__name__)


async def _judge_safely(judge: Judge, turn: TurnForJudge) -> Judgement:
    """A judge that breaks its never-raise contract (a plugin bug) costs its vote, not the turn."""
    started = time.monotonic()
    try:
        return await judge.judge(turn)
    except Exception as exc:
        vote = Vote(score=None, rationale="", source=_name(judge), error=f"judge raised {type(exc).__name__}: {exc}",
                    seconds=time.monotonic() - started)
        return Judgement(score=0.0, votes=[vote], judge=_name(judge), failed=True)


def _extras(ran: list[Judgement], decided_by: str | None) -> dict:
    return {"decided_by": decided_by, "ran": [j.judge for j in ran], "judge_extras": {j.judge: j.extras for j in ran}}
