"""From a judged turn to a training sample, and the Binary RL rule for which turns train.

The sample is made of the exact ids the engine used: the prompt as the engine rendered it and the
tokens it sampled (end-of-turn token included), with the log-probs it reported and the weight version
that produced them.
"""

from __future__ import annotations

from dataclasses import dataclass

from slime.utils.types import Sample


@dataclass(frozen=True)
class Decision:
    trainable: bool
    reward: float = 0.0
    reason: str | None = None  # why a turn is excluded (None when it trains)


def sample_from_turn(turn, reward: float, teacher=None) -> Sample:
    """`turn` is a `store.TurnRow` with a judgement; the sample's index is the turn's row id. `teacher`
    (`teacher.TeacherScores`, OPD/Combine) adds per-token teacher log-probs (and top-K rows)."""
    n = len(turn.response_ids)
    logprobs = list(turn.response_logprobs[:n]) + [0.0] * max(0, n - len(turn.response_logprobs))
    status = {"stop": Sample.Status.COMPLETED, "tool_calls": Sample.Status.COMPLETED,
              "length": Sample.Status.TRUNCATED}.get(turn.finish_reason or "stop", Sample.Status.COMPLETED)
    return Sample(
        group_index=turn.id,
        index=turn.id,
        prompt="",  # the request is in the store; the ids below are what trains
        tokens=list(turn.prompt_ids) + list(turn.response_ids),
        response=turn.response_message.get("content") or "",
        response_length=n,
        reward={"score": float(reward)},
        loss_mask=[1] * n,
        rollout_log_probs=logprobs,
        status=status,
        weight_version=turn.weight_version,
        weight_versions=[turn.weight_version] if turn.weight_version is not None else [],
        metadata={"session_id": turn.session_id, "turn": turn.turn_num, "turn_id": turn.id,
                  "judge": (turn.judgement or {}).get("judge")},
        teacher_log_probs=list(teacher.log_probs) if teacher is not None else None,
        teacher_topk_log_probs=teacher.topk_log_probs if teacher is not None else None,
        teacher_topk_indices=teacher.topk_indices if teacher is not None else None,
    )


def binary_rl_decision(turn) -> Decision:
    """Upstream's exclusion rule (no next state, or a neutral score) with its bugs fixed.

    Excluded turns are not samples at all: they neither fill a batch slot nor dilute the 1/B
    normalisation (upstream's at-least-one promotion of a reward-0 turn only did that, bug B14).
    """
    if not turn.next_state:
        return Decision(False, reason="no_next_state")
    if not turn.response_ids:
        return Decision(False, reason="empty_response")
    judgement = turn.judgement
    if judgement is None:
        return Decision(False, reason="not_judged")
    if judgement.get("failed"):
        return Decision(False, reason="judge_failed")
    score = float(judgement.get("score", 0.0))
    if score == 0.0:
        return Decision(False, reason="neutral")
    return Decision(True, reward=score)

