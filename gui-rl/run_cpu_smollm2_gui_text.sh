#!/usr/bin/env bash
# GUI RL on a CPU with SmolLM2-135M-Instruct and text observations: the policy operates real apps (Tk apps and
# chromium web apps under Xvfb, one desktop per episode in a bubblewrap sandbox, served by the environment service's
# `gui` provider) through Qwen's computer_use tool, seeing each screen as its OCR text view, and learns from the
# task's evaluator (+1 solved, -1 otherwise). One sample per step (--dynamic-history, upstream's), GRPO over the
# episode's outcome, PPO clip 0.2/0.28, a KL anchor; the trainer and the embedded engine as one process each, the
# pool servers as their own processes. A 135M model is not expected to operate apps well: this runs the whole
# machinery on a CPU.
#   bash gui-rl/run_cpu_smollm2_gui_text.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), TASKS_DIR (gui-rl/tasks), APPS_DIR (gui-rl/apps), PROMPT_DATA (default: the training split of
#      the tasks, written to RUN_DIR/train.jsonl), ENV_SERVER_URL (attach to a running service instead of starting
#      ENV_WORKERS pool servers, default 1), RUN_DIR (runs/<this folder>-text-cpu), ROLLOUT_BATCH_SIZE (2 tasks),
#      N_SAMPLES (4 per task), NUM_ROLLOUT (20), MAX_STEPS (8 steps per episode), LR (1e-6), STEP_JUDGE (rules: the CPU
#      OCR-diff judge scores every step and advantages are step_wise; module:factory for your own; default none).
# Needs scripts/setup_gui.sh's tools (Xvfb, xdotool, tesseract, chromium) and the bubblewrap sandbox.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-text-cpu}  # a copy of this folder: its own
# shellcheck source=gui-rl/gui_cpu_rl.sh
source "$HERE/gui_cpu_rl.sh"
gui_cpu_rl_args 8 20 4 128

SUMMARY=$(cat <<'PY'
print(f"GUI RL (text observations): {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} episodes per "
      f"rollout, at most {args.max_turns} steps, one sample per step; " + environments(f"tasks {args.gui_tasks_dir}"))
PY
)
agentic_cpu_launch ", the environment service as child processes (a desktop sandbox per episode)" "$SUMMARY" "$@"
