"""Conversation RL: the OpenAI-compatible proxy in front of the policy engine, sessions and turns,
next-state judging, the durable store, and the bridge that feeds judged turns to the trainer."""
