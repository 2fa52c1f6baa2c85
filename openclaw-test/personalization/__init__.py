"""Does the agent get better by talking to it? Simulated users with hidden preferences, versioned rating
functions and the experiment runner behind `openclaw-test/` (see openclaw-test/README.md)."""
