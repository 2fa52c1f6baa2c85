"""Rewards for multi-turn agent rollouts, as pure functions on plain lists (no I/O, no torch): what the environment
and the judges said, turned into the numbers the trainer's advantages start from (those are
`slime.training.trajectory_advantages`).

* `compose_step_target` / `trajectory_score`: the one composition `outcome + coef * prm_step`, used for
  logging *and* training; an unjudged step gets the outcome alone, flagged.
* `outcome_rewards`: the reward function every agentic folder's `reward_func` goes through (its `outcome(meta)`
  decides the outcome; the PRM step targets are attached here).
* `parse_boxed_vote` / `mean_vote`: a PRM judge's `\\boxed{1}` / `\\boxed{-1}` vote, and the mean of the valid
  votes.
* `boxed_answer` / `retool_reward`: the ReTool outcome: the last `\\boxed{...}` (nested braces) and +1 or a
  tool-shaped negative reward.

Where this deliberately differs from the original (see `../shared/reference/track2_spec.md` §1.3, §5.3, §7.1):

* The `--prm-step-coef` is honoured in training (§7.1.4): the original trained on `prm + outcome` and used
  the coef only in the logged score; here both go through `compose_step_target`.
* `parse_boxed_vote` skips boxes that are not a vote (an empty `\\boxed{}` quoted from the instructions, a
  `\\boxed{0}`) and reads the first valid one; the original read only the first box and scored anything
  else 0, and `mean_vote` returns None (not 0) when no vote is valid, so an unjudged step is not mistaken
  for a neutral one.
* `retool_reward` counts only successful tool calls when `successful_tool_calls` is given: the original
  counted failed and rejected executions too, so a wrong answer could climb from -1.1 to -0.6 by spamming
  code that fails (§5.3, §7.1.10).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from slime.training.trajectory_advantages import check_finite

__all__ = ["StepTarget", "attach_step_targets", "boxed_answer", "boxed_contents", "compose_step_target", "mean_vote",
           "outcome_rewards", "parse_boxed_vote", "retool_reward", "step_reward_fields", "trajectory_score"]


class StepTarget(NamedTuple):
    value: float
    judged: bool  # False: no PRM score for this step, so `value` is the outcome alone


def compose_step_target(outcome: float, prm_step: float | None, coef: float) -> StepTarget:
    """The training target of one step: `outcome + coef * prm_step`.

    The one composition used for both the logged score and the `step_wise` training target, so `coef`
    (`--prm-step-coef`) means the same in both (upstream trained on `prm + outcome` whatever the coef).
    An unjudged step (`prm_step is None`: the judge failed or gave no valid vote) gets the outcome alone and
    `judged=False`, so the caller can count it. In training, `--step-wise-unjudged skip` (the default) then leaves
    it out of its bucket (`stepwise_sample_from_metadata` reads the None in `prm_scores`); `outcome` trains it on
    that value, which is what a 0 vote would give.
    """
    outcome = check_finite("outcome", outcome)
    coef = check_finite("coef", coef)
    if prm_step is None:
        return StepTarget(outcome, False)
    return StepTarget(outcome + coef * check_finite("prm_step", prm_step), True)


def trajectory_score(outcome: float, prm_steps: Sequence[float | None], coef: float) -> float:
    """The logged score of a trajectory: the mean of its composed step targets.

    With every step judged this is `outcome + coef * mean(prm_steps)`, upstream's logged score; it is built
    from `compose_step_target` so the log and the training target cannot disagree. No steps: the outcome.
    """
    if not prm_steps:
        return check_finite("outcome", outcome)
    return math.fsum(compose_step_target(outcome, p, coef).value for p in prm_steps) / len(prm_steps)


def attach_step_targets(meta: dict, outcome: float, coef: float) -> list[float | None] | None:
    """Write the `step_wise` estimator's targets into a sample's metadata: for each PRM score in
    `meta["step_wise"]["prm_scores"]`, `outcome + coef * prm` (`compose_step_target`; unjudged: the outcome alone),
    as `step_scores_with_outcome`. Returns the PRM scores (None when the sample has none: nothing is written)."""
    prm = (meta.get("step_wise") or {}).get("prm_scores")
    if not prm:
        return None
    meta["step_wise"]["step_scores_with_outcome"] = [compose_step_target(outcome, p, coef).value for p in prm]
    return prm


def step_reward_fields(meta: dict, outcome: float, coef: float) -> dict:
    """What every agentic `reward_func` adds for a sample judged by a step judge: the `step_wise` targets written
    into `meta` (:func:`attach_step_targets`) and the logged `prm_step_score`, the composed score's part beyond the
    outcome (:func:`trajectory_score`); nothing for an unjudged sample."""
    prm = attach_step_targets(meta, outcome, coef)
    if not prm:
        return {}
    return {"prm_step_score": trajectory_score(outcome, prm, coef) - outcome}


def outcome_rewards(args, item, outcome: Callable[[dict], dict]):
    """A setting's reward over one sample or the step samples of one trajectory (`--dynamic-history`):
    `outcome(metadata)` gives a sample's reward fields (`score`, the trained one, and any logged beside it), and a
    sample a step judge scored also gets its `step_wise` target, `score + --prm-step-coef * prm`
    (:func:`step_reward_fields`). The settings' `reward_func`s are this with their own `outcome`."""
    coef = float(getattr(args, "prm_step_coef", 1.0))
    out = []
    for sample in item if isinstance(item, list) else [item]:
        meta = sample.metadata or {}
        reward = outcome(meta)
        reward.update(step_reward_fields(meta, reward["score"], coef))
        out.append(reward)
    return out if isinstance(item, list) else out[0]


# ------------------------------------------------------------------------------------------- step_wise


_BOX_OPEN = re.compile(r"\\boxed\s*\{")
_VOTE = re.compile(r"[+-]?\d+(?:\.\d+)?")


def boxed_contents(text: str | None) -> list[str]:
    """The contents of every balanced `\\boxed{...}` in `text`, in order (nested braces kept).

    A box whose braces never close is malformed and skipped; a box nested inside another is part of the
    outer one's content, not a box of its own.
    """
    if not text:
        return []
    out: list[str] = []
    pos = 0
    while (match := _BOX_OPEN.search(text, pos)) is not None:
        depth, j = 1, match.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:  # unbalanced: skip this opener and look for later boxes
            pos = match.end()
            continue
        out.append(text[match.end(): j - 1])
        pos = j
    return out


def boxed_answer(text: str | None) -> str | None:
    """The content of the LAST balanced `\\boxed{...}` (nested braces allowed), stripped; None if none.

    Upstream (math_dapo strict_box_verify) looked only at the last 100 characters of the response; a long
    final box still counts here. The comparison with the label is the caller's.
    """
    boxes = boxed_contents(text)
    return boxes[-1].strip() if boxes else None


def parse_boxed_vote(text: str | None, *, pick: str = "first") -> int | None:
    """A PRM judge's vote: +1 / -1 from the first `\\boxed{}` whose content is a number equal to +-1.

    Spaces inside the box are tolerated (`\\boxed{ -1 }`), as are `+1` and `1.0`. Boxes that are not a vote
    (`\\boxed{}`, `\\boxed{0}`, `\\boxed{yes}`, an unclosed box) are skipped rather than scored 0, so a
    thinking judge that quotes the empty `\\boxed{}` from its instructions still gets its verdict read.
    `pick="last"` reads the last valid vote instead (for judges that quote "\\boxed{1} or \\boxed{-1}"
    before answering). None when no box is a vote.
    """
    if pick not in ("first", "last"):
        raise ValueError(f"pick must be 'first' or 'last', got {pick!r}")
    votes = []
    for content in boxed_contents(text):
        content = content.strip()
        if _VOTE.fullmatch(content) and abs(float(content)) == 1.0:
            votes.append(1 if float(content) > 0 else -1)
            if pick == "first":
                break
    return (votes[0] if pick == "first" else votes[-1]) if votes else None


def mean_vote(votes: Sequence[int | None]) -> float | None:
    """The mean of the valid (+-1) votes; None when there is none (the step is unjudged, not neutral)."""
    valid = [v for v in votes if v is not None]
    if not valid:
        return None
    return math.fsum(valid) / len(valid)


# ---------------------------------------------------------------------------------------------- ReTool


def retool_reward(
    correct: bool,
    tool_calls: int,
    *,
    successful_tool_calls: int | None = None,
    shaping: bool = True,
) -> float:
    """ReTool's outcome reward: +1 if correct; a wrong answer gets `min(-0.6, -1 + 0.1 * (calls - 2) / 2)`.

    The shaping rewards tool use on wrong answers: 0 calls -1.1, 2 calls -1.0, 6 calls -0.8, >= 10 calls -0.6,
    always below the +1 of a correct answer. Upstream counted every execution, failed and rejected ones
    included, so spamming failing code climbed the scale; pass `successful_tool_calls` (executions that ran
    and exited cleanly) to count only those. Trivial successful calls (`print(1)`) can still buy up to 0.5;
    `shaping=False` gives a plain -1 for a wrong answer.
    """
    if tool_calls < 0:
        raise ValueError(f"tool_calls must be >= 0, got {tool_calls}")
    calls = tool_calls
    if successful_tool_calls is not None:
        if not 0 <= successful_tool_calls <= tool_calls:
            raise ValueError(f"successful_tool_calls must be in [0, tool_calls={tool_calls}], "
                             f"got {successful_tool_calls}")
        calls = successful_tool_calls
    if correct:
        return 1.0
    if not shaping:
        return -1.0
    return min(-0.6, -1.0 + 0.1 * (calls - 2) / 2)
