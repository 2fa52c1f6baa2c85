"""OPD's rollout function: batches of hint-distilled conversation turns from the proxy's store.

Pass `--rollout-function-path openclaw_opd_rollout.generate_rollout_openclaw_opd` with
`--data-source-path slime.conversation.rollout.ConversationDataSource --conversation-method opd`.
The mechanism (proxy, hint judges, teacher scoring) lives in `slime.conversation`.
"""

from slime.conversation.rollout import generate_rollout as generate_rollout_openclaw_opd

__all__ = ["generate_rollout_openclaw_opd"]
