#!/usr/bin/env bash
# Terminal RL: the entry point of the usage guide. Runs run_cpu_smollm2_terminal.sh when no GPU is visible and
# run_qwen3_8b_terminal.sh (Qwen3-8B on 8 GPUs; HF_CKPT required, env in its header) when one is, and says which.
#   bash terminal-rl/run_terminal_agent.sh [--dry-run] [extra trainer flags]
# FORCE_DEVICE=cpu|gpu skips the detection (scripts/method_entry.sh).
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"
detect_device
if [ "$DEVICE" = gpu ]; then
    echo "$ENTRY_NAME: $DEVICE_REASON: running the GPU script terminal-rl/run_qwen3_8b_terminal.sh" >&2
    exec bash "$ENTRY_DIR/run_qwen3_8b_terminal.sh" "$@"
fi
echo "$ENTRY_NAME: $DEVICE_REASON: running the CPU script terminal-rl/run_cpu_smollm2_terminal.sh" >&2
exec bash "$ENTRY_DIR/run_cpu_smollm2_terminal.sh" "$@"
