#!/usr/bin/env bash
# Combine (Binary RL + OPD in one objective, the recommended method): the entry point of the usage guide. Runs
# run_qwen3_4b_openclaw_combine.sh when a GPU is visible (the _lora one with LoRA), run_cpu_smollm2_openclaw_combine.sh
# otherwise, and says which and why; a config with training.method: combine_topk picks the top-K scripts instead:
#   bash openclaw-combine/run_combine_training.sh [--lora] [--config config/training_config.yaml [key=value ...]]
#                                                 [--dry-run] [extra trainer flags]
# Options, FORCE_DEVICE=cpu|gpu, USE_LORA / LORA_RANK / LORA_ALPHA / LORA_DROPOUT: scripts/method_entry.sh.
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"
run_method_entry combine "$@"
