#!/usr/bin/env bash
# Binary RL (the judge's ±1 on every turn as the reward, GRPO-style PPO): the entry point of the usage guide.
# Runs run_qwen3_4b_openclaw_rl.sh when a GPU is visible (the _lora one with LoRA), run_cpu_smollm2_openclaw_rl.sh
# otherwise, and says which and why:
#   bash openclaw-rl/run_binary_rl.sh [--lora] [--config config/training_config.yaml [key=value ...]] [--dry-run]
#                                     [extra trainer flags]
# Options, FORCE_DEVICE=cpu|gpu, USE_LORA / LORA_RANK / LORA_ALPHA / LORA_DROPOUT: scripts/method_entry.sh.
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"
run_method_entry rl "$@"
