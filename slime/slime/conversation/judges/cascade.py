"""Judges in order, cheapest and most certain first: the first non-zero score decides.

Typical use is `rules+embedding` (explicit feedback, then meaning) or `rules+llm`, so the expensive
judge only runs when the cheap one had no opinion. Every vote of every judge that ran is kept, so the
record shows why later judges were (or were not) consulted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from slime.conversation.judges.base import Judge, Judgement, TurnForJudge, Vote

__all__ = ["CascadeJudge", "JudgeChain", "chain_extras", "judge_name"]


class JudgeChain:
    """Judges run in order until one decides; shared by the PRM cascade and the hint cascade.

    `call(judge)` runs one judge and returns its result (a `Judgement` or a `HintResult`, both with `votes`,
    `judge`, `failed`, `extras`); a judge that raises instead of returning (a plugin bug) costs its vote,
    not the turn: `failure(judge, vote)` builds the result standing in for it.
    """

    def __init__(self, judges: Sequence, what: str = "judge"):
        if not judges:
            raise ValueError(f"a {what} cascade needs at least one {what}")
        self.judges = list(judges)
        self.name = "+".join(judge_name(judge) for judge in self.judges)

    async def run(self, call, decided, failure) -> tuple[list, list[Vote], object | None]:
        """(every result that ran, all their votes, the deciding result or None)."""
        ran, votes = [], []
        for judge in self.judges:
            started = time.monotonic()
            try:
                result = await call(judge)
            except Exception as exc:
                vote = Vote(score=None, rationale="", source=judge_name(judge),
                            error=f"judge raised {type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
                result = failure(judge, vote)
            ran.append(result)
            votes.extend(result.votes)
            if decided(result):
                return ran, votes, result
        return ran, votes, None

    async def aclose(self) -> None:
        errors = []
        for judge in self.judges:
            try:
                await judge.aclose()
            except Exception as exc:  # close the rest anyway, then report
                errors.append(exc)
        if errors:
            raise errors[0]


def judge_name(judge) -> str:
    return getattr(judge, "name", type(judge).__name__)


def chain_extras(ran: list, decided_by: str | None) -> dict:
    return {"decided_by": decided_by, "ran": [r.judge for r in ran],
            "failed_judges": [r.judge for r in ran if r.failed],
            "judge_extras": {r.judge: r.extras for r in ran}}


class CascadeJudge(JudgeChain):
    def __init__(self, judges: Sequence[Judge]):
        super().__init__(judges, "judge")

    async def judge(self, turn: TurnForJudge) -> Judgement:
        ran, votes, decider = await self.run(
            lambda judge: judge.judge(turn), lambda j: j.score != 0,
            lambda judge, vote: Judgement(score=0.0, votes=[vote], judge=judge_name(judge), failed=True))
        if decider is not None:
            return Judgement(score=decider.score, votes=votes, judge=self.name, rationale=decider.rationale,
                             extras=chain_extras(ran, decided_by=decider.judge))
        return Judgement(score=0.0, votes=votes, judge=self.name, failed=all(j.failed for j in ran),
                         extras=chain_extras(ran, decided_by=None))
