#!/usr/bin/env bash
# The SFT warm start of terminal RL on a CPU: SmolLM2-135M-Instruct writes no tool call at all as shipped
# (terminal-rl/README.md), so it first learns from verified demonstrations (terminal-rl/data/sft_demos.jsonl, written by
# `python terminal-rl/terminal_demonstrations.py`: each training task solved through the real service and shell
# tools, kept only when its tests pass, one row per model turn in the loop's own layout) through the same trainer with
# --loss-type sft_loss (slime.rollout.sft_rollout). With EVAL=1 it evaluates the held-out tasks through the real turn
# loop before training and after the last step (eval/heldout/* in the metrics).
# The weights it ends with: <RUN_DIR>/ckpt/iter_<steps>/model (an HF folder: HF_CKPT of run_cpu_smollm2_terminal.sh).
#   bash terminal-rl/run_cpu_smollm2_terminal_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), SFT_DATA (terminal-rl/data/sft_demos.jsonl), RUN_DIR (runs/<this folder>-sft-cpu), BATCH (8
#      rows per step), NUM_ROLLOUT (32 steps, about three passes over the 84 rows), LR (5e-5), EVAL=1 with EVAL_DATA
#      (terminal-rl/data/heldout.jsonl) and TASKS_DIR (terminal-rl/tasks).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-sft-cpu}  # a copy of this folder: its own
NUM_ROLLOUT=${NUM_ROLLOUT:-32}
agentic_cpu_sft_args 3 \
    --prompt-data "${SFT_DATA:-$HERE/data/sft_demos.jsonl}" --input-key prompt --metadata-key metadata
# EVAL=1: evaluation goes through the terminal turn loop itself: the same generate function, service and reward as RL
EVAL_ARGS=(
    --eval-input-key task
    --extra-python-path "$HERE" --custom-generate-function-path generate.generate
    --custom-rm-path generate.reward_func --dynamic-history
    --terminal-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --env-workers 1 --env-provider terminal --max-turns 6
)
agentic_cpu_sft_eval 256 4096 "${EVAL_ARGS[@]}"
agentic_cpu_sft_launch "demonstration turns" "$@"
