"""Binary RL (`--conversation-method rl`): what a judged conversation turn becomes under OpenClaw-RL's first method.

The reward judge scores each main-line turn from its next state (the user's reply, a tool result, explicit
feedback). A +1 or -1 trains with that reward as the advantage on every response token (GRPO with no group
baseline: one sample per turn); a neutral or failed judgement trains nothing, since it would neither fill a batch
slot usefully nor dilute the batch normalisation.

Upstream kept this decision inside its API server (`openclaw-rl/openclaw_api_server.py`); here the server is the
framework's proxy (`slime.conversation.proxy`, shared by the three conversation methods) and this module is the
part that makes the method. The registry resolves the name `rl` (aliases `binary_rl`, `binary`) to `BinaryRL`
below, importing this module from the first folder on the Python path that has it: a fork of this folder, put
on `--extra-python-path` by its scripts, runs its own copy.
"""

from __future__ import annotations

from slime.conversation.methods.base import REWARD_AS_ADVANTAGE, Decision, Method, TurnSignals


class BinaryRL(Method):
    name = "rl"
    uses_reward_judge = True
    uses_hints = False
    training = dict(REWARD_AS_ADVANTAGE)

    def decide(self, turn, signals: TurnSignals) -> Decision:
        verdict = signals.reward
        if verdict is None:
            return Decision(False, reason="not_judged")
        if verdict.failed:
            return Decision(False, reason="judge_failed")
        if signals.score == 0.0:
            return Decision(False, reason="neutral")
        return Decision(True, reward=signals.score)
