"""Agentic RL: the sandbox, and rewards and advantages for multi-turn agent rollouts."""
