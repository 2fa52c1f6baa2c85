"""The method protocol: what a judged conversation turn becomes.

A method reads the signals the framework gathered about one turn (the reward judge's verdict, the hint
judge's result, the teacher's log-probs under the hinted prompt) and decides whether the turn trains, with
which reward, and whether the teacher's log-probs go into its sample. It also names the trainer settings its
signal needs (the loss, the advantage estimator): a method is chosen together with its loss.

    from openclaw_combine_method import Combine     # openclaw-combine/, or a fork of it on the path

    class ShortRepliesOnly(Combine):
        name = "combine-short"
        def decide(self, turn, signals):
            if len(turn.response_ids) > 64:
                return Decision(False, reason="too_long")
            return super().decide(turn, signals)

A method folder registers nothing: `--conversation-method my_method:build` loads `build(**options)` from the
folder (on `--extra-python-path`), in the trainer and in the proxy alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from slime.conversation.judges.base import Judgement

TOPK_DEFAULT = 50  # teacher top-K log-probs per token for the top-K losses, as upstream's scripts

# The trainer settings of a method whose sample carries a +-1 reward and nothing else to compare it with (one
# sample per turn, one per group): the raw reward is the advantage, no group baseline. Binary RL and Combine share it.
REWARD_AS_ADVANTAGE = {"advantage_estimator": "grpo", "rewards_normalization": False}


@dataclass(frozen=True)
class Decision:
    trainable: bool
    reward: float = 0.0
    reason: str | None = None  # why a turn is excluded (None when it trains)
    use_teacher: bool = True  # put the teacher's log-probs (when there are any) into the sample


@dataclass(frozen=True)
class TurnSignals:
    """What the framework learned about a turn from its next state. A signal the method does not use is None."""

    reward: Judgement | None = None  # the reward judge's verdict, or the user's own rating (feedback)
    hint: Any = None  # `judges.hints.HintResult` from the hint judge
    teacher: Any = None  # `teacher.TeacherScores` of the sampled response under the hinted prompt
    teacher_error: str | None = None  # why teacher scoring failed, when it did

    @property
    def score(self) -> float:
        """The reward judge's score, 0.0 when there is none or every vote failed."""
        if self.reward is None or self.reward.failed:
            return 0.0
        return float(self.reward.score)


@runtime_checkable
class ConversationMethod(Protocol):
    name: str
    uses_reward_judge: bool  # the reward (PRM) judge scores every turn
    uses_hints: bool  # the hint judge reads the next state; the teacher scores turns with an accepted hint
    training: Mapping[str, Any]  # trainer settings (argparse dests) the method needs unless the user set them

    def decide(self, turn, signals: TurnSignals) -> Decision: ...


class Method:
    """Base class of the method folders' methods; subclass it (or write any object with the same attributes)."""

    name = "method"
    uses_reward_judge = True
    uses_hints = False
    training: Mapping[str, Any] = {}

    def decide(self, turn, signals: TurnSignals) -> Decision:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def check_method(method, source: str):
    """`method` has what the framework calls; a clear error naming `source` otherwise."""
    problems = []
    if not isinstance(getattr(method, "name", None), str) or not method.name:
        problems.append("a non-empty 'name' string")
    for flag in ("uses_reward_judge", "uses_hints"):
        if not isinstance(getattr(method, flag, None), bool):
            problems.append(f"a boolean '{flag}'")
    if not callable(getattr(method, "decide", None)):
        problems.append("a decide(turn, signals) method")
    if not isinstance(getattr(method, "training", {}), Mapping):
        problems.append("a 'training' mapping of trainer settings")
    if problems:
        raise ValueError(f"method {source!r} returned {type(method).__name__}, which lacks " + ", ".join(problems))
    if not (method.uses_reward_judge or method.uses_hints):
        raise ValueError(f"method {source!r} ({method.name}) uses neither the reward judge nor hints: "
                         "it would have no signal to decide on")
    return method
