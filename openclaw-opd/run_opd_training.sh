#!/usr/bin/env bash
# On-policy distillation from hindsight hints: the entry point of the usage guide. Runs run_qwen3_4b_openclaw_opd.sh
# when a GPU is visible (the _lora one with LoRA), run_cpu_smollm2_openclaw_opd.sh otherwise, and says which and why;
# a config with training.method: opd_topk picks the top-K scripts instead:
#   bash openclaw-opd/run_opd_training.sh [--lora] [--config config/training_config.yaml [key=value ...]] [--dry-run]
#                                         [extra trainer flags]
# Options, FORCE_DEVICE=cpu|gpu, USE_LORA / LORA_RANK / LORA_ALPHA / LORA_DROPOUT: scripts/method_entry.sh.
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"
run_method_entry opd "$@"
