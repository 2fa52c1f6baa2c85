"""Upstream's import path for loss helpers (`slime.backends.megatron_utils.loss`), for custom losses ported from
OpenClaw-RL method folders (`--custom-loss-batch-layout upstream`). This project's Megatron backend is
`slime.backends.megatron`."""
