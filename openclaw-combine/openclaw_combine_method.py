"""Combine (`--conversation-method combine`, and `combine_topk`): Binary RL and OPD on one sample per turn.

Both judges read the turn's next state. A hint and a +-1 give the teacher's log-probs and the reward; a hint alone
gives the teacher's log-probs with reward 0; a +-1 alone gives the reward without teacher data (its OPD term is
exactly 0 in the loss); neither excludes the turn. The loss is this folder's `combine_loss.py`: the PPO policy
loss with advantage `w_rl * reward + w_opd * (teacher - old)`, or with the top-K teacher term (`combine_topk`).

Upstream's Combine server subclassed OPD's (`openclaw_combine_api_server.py` imported `openclaw-opd/`); here
nothing is imported from another folder: what Combine shares with OPD and Binary RL (the proxy, the judges, the
teacher, the top-K term) is the framework's.
"""

from __future__ import annotations

from slime.conversation.methods.base import REWARD_AS_ADVANTAGE, TOPK_DEFAULT, Decision, Method, TurnSignals


class Combine(Method):
    name = "combine"
    uses_reward_judge = True
    uses_hints = True
    training = {**REWARD_AS_ADVANTAGE, "loss_type": "custom_loss",
                "custom_loss_function_path": "combine_loss.combine_loss_function"}

    def decide(self, turn, signals: TurnSignals) -> Decision:
        if signals.teacher is not None or signals.score != 0.0:
            return Decision(True, reward=signals.score)
        return Decision(False, reason="teacher_failed" if signals.teacher_error else "no_signal")


class CombineTopK(Combine):
    """Combine with the top-K teacher term: the PPO loss on the reward plus the top-K KL to the hinted teacher."""

    name = "combine_topk"
    training = {**REWARD_AS_ADVANTAGE, "loss_type": "custom_loss",
                "custom_loss_function_path": "combine_loss.combine_topk_loss_function",
                "distill_topk": TOPK_DEFAULT}
