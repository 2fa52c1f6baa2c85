"""Combine's rollout function: one merged sample per judged turn (reward and/or teacher log-probs).

Pass `--rollout-function-path openclaw_combine_rollout.generate_rollout_openclaw_combine` with
`--data-source-path slime.conversation.rollout.ConversationDataSource --conversation-method combine`.
"""

from slime.conversation.rollout import generate_rollout as generate_rollout_openclaw_combine

__all__ = ["generate_rollout_openclaw_combine"]
