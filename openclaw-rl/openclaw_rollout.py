"""Binary RL's rollout function (`--rollout-function-path openclaw_rollout.generate_rollout`, upstream's module name): the
framework's store drain (`slime.conversation.rollout`), since openclaw_rl_method.py has already decided, turn by turn, what
trains. A fork that wants other batches defines its own `generate_rollout(args, rollout_id, data_source,
evaluation=False)` here."""

from slime.conversation.rollout import generate_rollout

__all__ = ["generate_rollout"]
