"""The hint-judge interface (OPD / Combine): a judged turn in, a hindsight hint (or none) out.

A hint judge reads what followed an assistant response (the next state) and decides whether it reveals
something that would have made the response better ("shorter please", "no, I meant Paris, Texas", a
tool's traceback). If so, the hint, phrased as an instruction to the assistant, is what the teacher sees
appended to the user's request. No accepted hint means no OPD sample for the turn.

This module holds the result type, the LLM output parsing, the candidate selection (longest hint, or the
hint whose teacher distribution overlaps the student's most through `choose`) and the cascade used for
`rules+llm`. Hint judges never raise: failed votes are recorded with an error and the turn is simply not
accepted.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from slime.conversation.judges.base import TurnForJudge, Vote
from slime.conversation.judges.cascade import JudgeChain, chain_extras, judge_name
from slime.conversation.judges.voting import parse_boxed_score

__all__ = [
    "CascadeHintJudge",
    "HintJudge",
    "HintResult",
    "HintScorer",
    "choose",
    "hint_candidates",
    "parse_hint",
    "parse_hint_score",
    "select_longest",
]

HINT_BLOCK = re.compile(r"\[HINT_START\](.*?)\[HINT_END\]", re.DOTALL)

# scorer(hint) -> how well the teacher, given this hint, agrees with what the student sampled (higher wins)
HintScorer = Callable[[str], Awaitable[float]]


@dataclass
class HintResult:
    accepted: bool
    hint: str  # "" when not accepted
    votes: list[Vote]  # every vote; Vote.rationale keeps the raw judge text (or the rule that fired)
    judge: str
    failed: bool = False  # every vote failed: "not accepted" is a fallback, not an opinion
    extras: dict[str, Any] = field(default_factory=dict)  # e.g. vote_hints, chosen, rule, decided_by

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "HintResult":
        return cls(accepted=bool(data["accepted"]), hint=data.get("hint", ""),
                   votes=[Vote(**v) for v in data.get("votes", [])], judge=data["judge"],
                   failed=bool(data.get("failed", False)), extras=dict(data.get("extras") or {}))


@runtime_checkable
class HintJudge(Protocol):
    name: str

    async def hint(self, turn: TurnForJudge) -> HintResult: ...

    async def aclose(self) -> None: ...


# ---------------------------------------------------------------------------------------------------
# Parsing and selection
# ---------------------------------------------------------------------------------------------------


def parse_hint_score(text: str | None) -> int | None:
    """The last `\\boxed{}` value when it is +1 or -1; None otherwise (0 is not a hint-judge answer)."""
    return parse_boxed_score(text, allowed=(1, -1))


def parse_hint(text: str | None) -> str:
    """The stripped text of the LAST `[HINT_START]...[HINT_END]` block, "" when there is none.

    It is parsed whatever the score says; only the selection ignores hints of negative votes.
    """
    if not text:
        return ""
    blocks = HINT_BLOCK.findall(text)
    return blocks[-1].strip() if blocks else ""


def hint_candidates(scores: Sequence[int | None], hints: Sequence[str], min_hint_chars: int = 10) -> list[int]:
    """Indices of the votes that may supply the hint: a positive vote whose stripped hint is longer than
    `min_hint_chars` characters."""
    return [i for i, (score, hint) in enumerate(zip(scores, hints))
            if score == 1 and len(hint.strip()) > min_hint_chars]


def select_longest(hints: Sequence[str], candidates: Sequence[int]) -> int | None:
    """The candidate with the longest stripped hint, the first one on ties; None without candidates."""
    best = None
    for i in candidates:
        if best is None or len(hints[i].strip()) > len(hints[best].strip()):
            best = i
    return best


async def choose(candidates: Sequence[str], scorer: HintScorer) -> tuple[int, list[float | None]]:
    """The index of the candidate hint the scorer rates highest, and every candidate's score.

    Candidates are scored concurrently. A scorer that raises or returns a non-finite number costs that
    candidate its chance (score None); ties go to the first candidate; when no candidate could be scored
    the longest hint wins (the default selection). A single candidate is returned without scoring.
    """
    if not candidates:
        raise ValueError("choose() needs at least one candidate hint")
    if len(candidates) == 1:
        return 0, [None]

    async def score(hint: str) -> float | None:
        try:
            value = float(await scorer(hint))
        except Exception:
            return None
        return value if math.isfinite(value) else None

    scores = list(await asyncio.gather(*(score(hint) for hint in candidates)))
    scored = [i for i, value in enumerate(scores) if value is not None]
    if not scored:
        return select_longest(candidates, range(len(candidates))), scores
    best = scored[0]
    for i in scored[1:]:
        if scores[i] > scores[best]:
            best = i
    return best, scores


# ---------------------------------------------------------------------------------------------------
# Cascade: `rules+llm`
# ---------------------------------------------------------------------------------------------------


class CascadeHintJudge(JudgeChain):
    """Hint judges in order, cheapest first: the first accepted hint wins; every vote is kept."""

    def __init__(self, judges: Sequence[HintJudge]):
        super().__init__(judges, "hint judge")

    async def hint(self, turn: TurnForJudge) -> HintResult:
        ran, votes, decider = await self.run(
            lambda judge: judge.hint(turn), lambda r: r.accepted,
            lambda judge, vote: HintResult(accepted=False, hint="", votes=[vote], judge=judge_name(judge), failed=True))
        if decider is not None:
            return HintResult(accepted=True, hint=decider.hint, votes=votes, judge=self.name,
                              extras=chain_extras(ran, decided_by=decider.judge))
        return HintResult(accepted=False, hint="", votes=votes, judge=self.name, failed=all(r.failed for r in ran),
                          extras=chain_extras(ran, decided_by=None))
