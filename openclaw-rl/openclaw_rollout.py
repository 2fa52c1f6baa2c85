"""Binary RL's rollout function: one batch of judged conversation turns from the proxy's store.

Pass `--rollout-function-path openclaw_rollout.generate_rollout_openclaw` together with
`--data-source-path slime.conversation.rollout.ConversationDataSource` (which starts the proxy).
The mechanism lives in `slime.conversation`; this folder only chooses it.
"""

from slime.conversation.rollout import generate_rollout as generate_rollout_openclaw

__all__ = ["generate_rollout_openclaw"]
