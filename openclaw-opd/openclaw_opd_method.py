"""On-policy distillation from hindsight hints (`--conversation-method opd`, and `opd_topk`).

The hint judge looks for a correction in the turn's next state ("no, I meant ..."). With an accepted hint, the
teacher scores the exact sampled response under the prompt plus the hint, and the turn trains on those per-token
teacher log-probs: advantage `teacher - old` on every response token (`opd`), or the top-K KL to the teacher's
distribution (`opd_topk`: K teacher tokens plus a tail bin, `--distill-topk`). No hint, no sample.

Upstream kept this decision inside `openclaw-opd/openclaw_opd_api_server.py`; here the server is the framework's
proxy, shared by the three conversation methods, and this module is what makes the method. The top-K loss stays
in the framework (`slime.utils.loss.topk_distillation_loss_function`) because Combine's top-K variant uses the same
term, and a folder never imports another folder.
"""

from __future__ import annotations

from slime.conversation.methods.base import TOPK_DEFAULT, Decision, Method, TurnSignals


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
