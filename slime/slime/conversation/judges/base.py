"""The one judge interface: a judged turn in, a `Judgement` (final score, every vote, rationale) out.

A judge sees the turn as the model saw it (request messages + the assistant message it produced) and
the *next state*: every message that followed that response in the same conversation (tool results,
the user's reply, explicit feedback). Judges never raise for a bad vote: a failed or unparseable vote
is recorded with `score=None` and an `error`, and the final score falls back to neutral (0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Vote:
    score: int | None  # +1 / -1 / 0, or None when the vote failed or could not be parsed
    rationale: str  # the judge model's raw text, or the rule / similarity that decided
    source: str  # "llm", "rules", "embedding", "feedback", or a plugin's name
    error: str | None = None  # "timeout", "engine error: ...", "unparseable", ...
    seconds: float = 0.0


@dataclass
class Judgement:
    score: float  # final score: +1.0, -1.0 or 0.0
    votes: list[Vote]
    judge: str  # name of the judge that produced it
    rationale: str = ""  # a representative rationale (the first vote that agrees with the final score)
    failed: bool = False  # every vote failed: the score is a fallback, not an opinion
    extras: dict[str, Any] = field(default_factory=dict)  # judge-specific data (e.g. similarities)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Judgement":
        votes = [Vote(**v) for v in data.get("votes", [])]
        return cls(score=float(data["score"]), votes=votes, judge=data["judge"],
                   rationale=data.get("rationale", ""), failed=bool(data.get("failed", False)),
                   extras=dict(data.get("extras") or {}))


@dataclass
class TurnForJudge:
    session_id: str
    turn_num: int
    prompt_messages: list[dict]  # the request's messages, OpenAI format, as the model saw them
    response_message: dict  # the assistant message: {"role": "assistant", "content": ..., "tool_calls": ...}
    next_state: list[dict]  # the messages that followed the response (at least one)


@runtime_checkable
class Judge(Protocol):
    name: str

    async def judge(self, turn: TurnForJudge) -> Judgement: ...

    async def aclose(self) -> None: ...
