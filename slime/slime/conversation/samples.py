"""From a judged turn to a training sample (which turns train is the method's decision, `methods/`).

The sample is made of the exact ids the engine used: the prompt as the engine rendered it and the
tokens it sampled (end-of-turn token included), with the log-probs it reported and the weight version
that produced them.

A trace another model wrote (`POST /v1/traces`) has ids rendered from its text and no log-probs: its sample
says so (`metadata.off_policy`, `rollout_log_probs` None), and the trainer recomputes the old log-probs, leaves
it at weight 1 under TIS and scales its whole loss by `--off-policy-weight`. A turn whose engine reported fewer
log-probs than it sampled tokens is treated the same way (`metadata.source` "incomplete_logprobs"): its
behaviour log-probs are unknown, and a 0.0 filler would pass for a probability of 1.
"""

from __future__ import annotations

from slime.utils.types import Sample


def sample_from_turn(turn, reward: float, teacher=None, method: str | None = None) -> Sample:
    """`turn` is a `store.TurnRow` with a judgement; the sample's index is the turn's row id. `teacher`
    (`teacher.TeacherScores`, OPD/Combine) adds per-token teacher log-probs (and top-K rows)."""
    n = len(turn.response_ids)
    recorded = list(turn.response_logprobs or [])
    # behaviour log-probs for every sampled token, or none at all: a turn with fewer log-probs than ids (an engine
    # that stopped reporting them part-way) is trained as off-policy, never padded with 0.0 (TIS would read a filler
    # 0.0 as a behaviour probability of 1)
    off_policy = n > 0 and len(recorded) < n
    logprobs = None if off_policy else recorded[:n]
    source = ("incomplete_logprobs" if recorded else turn.turn_reason) if off_policy else None
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
                  "judge": (turn.judgement or {}).get("judge"), "method": method,
                  **({"off_policy": True, "source": source} if off_policy else {})},
        teacher_log_probs=list(teacher.log_probs) if teacher is not None else None,
        teacher_topk_log_probs=teacher.topk_log_probs if teacher is not None else None,
        teacher_topk_indices=teacher.topk_indices if teacher is not None else None,
    )
