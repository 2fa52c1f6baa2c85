"""The three conversation methods of OpenClaw-RL, and their top-K loss variants.

- Binary RL: the reward judge scores the turn from its next state; a +1 or -1 trains with that reward, a
  neutral or failed judgement trains nothing (it would neither fill a batch slot usefully nor dilute the
  batch normalisation).
- On-policy distillation (OPD): the hint judge looks for a hindsight hint in the next state; with one, the
  teacher scores the exact sampled response under the prompt plus the hint and the turn trains on those
  per-token teacher log-probs. No hint, no sample.
- Combine: both at once, one sample per turn: hint and +-1 give teacher log-probs and the reward; a hint
  alone gives teacher log-probs with reward 0; a +-1 alone gives the reward without teacher data (its OPD term
  is exactly 0 in the loss); neither excludes the turn.

`training` holds the trainer settings each signal needs; a flag the user gives explicitly wins.
"""

from __future__ import annotations

from slime.conversation.methods.base import Decision, Method, TurnSignals

TOPK_DEFAULT = 50  # teacher top-K log-probs per token for the top-K losses, as upstream's scripts

# a +-1 reward per sample (one sample per group): the raw reward is the advantage, no group baseline
_REWARD_AS_ADVANTAGE = {"advantage_estimator": "grpo", "rewards_normalization": False}


class BinaryRL(Method):
    name = "rl"
    uses_reward_judge = True
    uses_hints = False
    training = dict(_REWARD_AS_ADVANTAGE)

    def decide(self, turn, signals: TurnSignals) -> Decision:
        verdict = signals.reward
        if verdict is None:
            return Decision(False, reason="not_judged")
        if verdict.failed:
            return Decision(False, reason="judge_failed")
        if signals.score == 0.0:
            return Decision(False, reason="neutral")
        return Decision(True, reward=signals.score)


class OnPolicyDistillation(Method):
    name = "opd"
    uses_reward_judge = False
    uses_hints = True
    training = {"advantage_estimator": "on_policy_distillation"}

    def decide(self, turn, signals: TurnSignals) -> Decision:
        if signals.teacher is not None:
            # the user's own rating (feedback) is kept as the reward; OPD's loss does not read it
            return Decision(True, reward=signals.score)
        if signals.teacher_error:
            return Decision(False, reason="teacher_failed")
        hint = signals.hint
        return Decision(False, reason="judge_failed" if hint is not None and hint.failed else "no_hint")


class OnPolicyDistillationTopK(OnPolicyDistillation):
    """OPD with the top-K reverse KL to the teacher (K teacher tokens plus a tail bin) instead of the
    token-level advantage."""

    name = "opd_topk"
    training = {"loss_type": "custom_loss",
                "custom_loss_function_path": "slime.utils.loss.topk_distillation_loss_function",
                "compute_advantages_and_returns": False, "rewards_normalization": False,
                "distill_topk": TOPK_DEFAULT}


class Combine(Method):
    name = "combine"
    uses_reward_judge = True
    uses_hints = True
    training = {**_REWARD_AS_ADVANTAGE, "loss_type": "custom_loss",
                "custom_loss_function_path": "slime.utils.loss.combine_loss_function"}

    def decide(self, turn, signals: TurnSignals) -> Decision:
        if signals.teacher is not None or signals.score != 0.0:
            return Decision(True, reward=signals.score)
        return Decision(False, reason="teacher_failed" if signals.teacher_error else "no_signal")


class CombineTopK(Combine):
    """Combine with the top-K teacher term: the PPO loss on the reward plus the top-K KL to the hinted teacher."""

    name = "combine_topk"
    training = {**_REWARD_AS_ADVANTAGE, "loss_type": "custom_loss",
                "custom_loss_function_path": "slime.utils.loss.combine_topk_loss_function",
                "distill_topk": TOPK_DEFAULT}
