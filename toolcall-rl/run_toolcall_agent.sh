#!/usr/bin/env bash
# Tool-call RL (ReTool): the entry point of the usage guide. Runs run_cpu_smollm2_toolcall.sh when no GPU is visible
# and run_qwen3_4b_retool.sh (Qwen3-4B on 8 GPUs; HF_CKPT required, env in its header) when one is, and says which.
#   bash toolcall-rl/run_toolcall_agent.sh [--dry-run] [extra trainer flags]
# FORCE_DEVICE=cpu|gpu skips the detection (scripts/method_entry.sh).
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"
detect_device
if [ "$DEVICE" = gpu ]; then
    [ -f "$ENTRY_DIR/run_qwen3_4b_retool.sh" ] || entry_fail "$DEVICE_REASON, but there is no GPU script run_qwen3_4b_retool.sh in toolcall-rl; FORCE_DEVICE=cpu runs the CPU script"
    echo "$ENTRY_NAME: $DEVICE_REASON: running the GPU script toolcall-rl/run_qwen3_4b_retool.sh" >&2
    exec bash "$ENTRY_DIR/run_qwen3_4b_retool.sh" "$@"
fi
echo "$ENTRY_NAME: $DEVICE_REASON: running the CPU script toolcall-rl/run_cpu_smollm2_toolcall.sh" >&2
exec bash "$ENTRY_DIR/run_cpu_smollm2_toolcall.sh" "$@"
