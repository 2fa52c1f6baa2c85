"""The rollout function of OPD (`--rollout-function-path openclaw_opd_rollout.generate_rollout`, upstream's module name).

A batch is `--rollout-batch-size` judged turns from the store, oldest first, each its own group; the method
(`openclaw_opd_method.py`) already decided which turns train and with what, when they were judged. Draining the store is
the same for the three conversation methods, so the function is the framework's
(`slime.conversation.rollout.generate_rollout`: claims a batch, marks it trained after the step, hands an
interrupted batch back on restart); upstream's three `openclaw_*rollout.py` files repeated it. A fork that wants
another batch (filter, reorder, mix in other samples) replaces the assignment below with its own
`generate_rollout(args, rollout_id, data_source, evaluation=False)`, calling the framework's for the claim.
"""

from slime.conversation import rollout as _conversation_rollout

generate_rollout = _conversation_rollout.generate_rollout
