#!/usr/bin/env bash
# The SFT warm start of GUI RL (text observations) on a CPU: SmolLM2-135M-Instruct as shipped writes no computer_use
# call in the loop's format, so it first learns from verified demonstrations (gui-rl/data/sft_demos.jsonl, written by
# `python gui-rl/gui_demonstrations.py --split train --out ...`: each training task's scripted solution played
# through the real service and desktop, kept only when the evaluator scores it 1, one row per step in the loop's own
# layout) through the same trainer with --loss-type sft_loss (slime.rollout.sft_rollout). With EVAL=1 it evaluates
# the held-out tasks through the real loop before training and after the last step (eval/heldout/* in the metrics).
# The weights it ends with: <RUN_DIR>/ckpt/iter_<steps>/model (HF_CKPT of run_cpu_smollm2_gui_text.sh).
#   bash gui-rl/run_cpu_smollm2_gui_text_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), SFT_DATA (gui-rl/data/sft_demos.jsonl), RUN_DIR (runs/<this folder>-text-sft-cpu), BATCH (8
#      rows per step), NUM_ROLLOUT (32 steps), LR (5e-5), EVAL=1 with EVAL_DATA (gui-rl/data/heldout.jsonl) and
#      TASKS_DIR (gui-rl/tasks), APPS_DIR (gui-rl/apps), MAX_STEPS (8).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-text-sft-cpu}  # a copy of this folder: its own
NUM_ROLLOUT=${NUM_ROLLOUT:-32}
agentic_cpu_sft_args 3 \
    --prompt-data "${SFT_DATA:-$HERE/data/sft_demos.jsonl}" --input-key prompt --metadata-key metadata
# EVAL=1: evaluation goes through the GUI loop itself: the same generate function, service and reward as RL
EVAL_ARGS=(
    --eval-input-key prompt
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_gui.generate
    --custom-rm-path generate_with_gui.reward_func --dynamic-history
    --gui-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --gui-apps-dir "${APPS_DIR:-$HERE/apps}"
    --env-workers 1 --env-provider gui --max-turns "${MAX_STEPS:-8}"
)
agentic_cpu_sft_eval 128 4096 "${EVAL_ARGS[@]}"
agentic_cpu_sft_launch "demonstration steps" "$@"
