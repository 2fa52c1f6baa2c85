#!/usr/bin/env bash
# GUI RL on a CPU with screenshots: a vision-language policy (Qwen2.5-VL architecture; default the tiny random-weight
# one, `tiny-vlm`, as no VLM ships in any package here) sees the last 3 screenshots of its desktop (real Tk and
# chromium apps under Xvfb, one desktop per episode in a bubblewrap sandbox, served by the environment service's
# `gui` provider) and acts through Qwen's computer_use tool; the task's evaluator gives +1 solved, -1 otherwise.
# Every step is one sample carrying its screenshots (the trainer scores exactly the prompt and images the engine
# saw), GRPO over the episode's outcome, PPO clip 0.2/0.28, a KL anchor; the trainer as TRAINER_PROCS torchrun ranks
# (default 2: the fsdp backend's data parallel on gloo), the embedded engine serving the VLM, the pool servers as
# their own processes. Random weights act at random: this runs the screenshot machinery end to end on a CPU.
#   bash gui-rl/run_cpu_tiny_vlm_gui.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (tiny-vlm; any Qwen2.5-VL folder), TASKS_DIR (gui-rl/tasks), APPS_DIR (gui-rl/apps), PROMPT_DATA
#      (default: the training split of the tasks, written to RUN_DIR/train.jsonl), ENV_SERVER_URL (attach to a running
#      service instead of starting ENV_WORKERS pool servers, default 1), RUN_DIR (runs/<this folder>-vlm-cpu),
#      TRAINER_PROCS (2), ROLLOUT_BATCH_SIZE (2 tasks), N_SAMPLES (2 per task), NUM_ROLLOUT (4), MAX_STEPS (4 steps per
#      episode), MAX_PIXELS (230400: screenshots scaled to 640x360, about 300 image tokens each), LR (1e-6), STEP_JUDGE
#      (rules: the OCR-diff judge; llm: a VLM PRM judging the screenshots before and after, with --prm-enable or
#      --prm-engine-url; module:factory; default none).
# Needs scripts/setup_gui.sh's tools (Xvfb, xdotool, tesseract, chromium) and the bubblewrap sandbox.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
TRAINER_PROCS=${TRAINER_PROCS:-2}
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
HF_CKPT=${HF_CKPT:-tiny-vlm}
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-vlm-cpu}  # a copy of this folder: its own
# shellcheck source=gui-rl/gui_cpu_rl.sh
source "$HERE/gui_cpu_rl.sh"
gui_cpu_rl_args 4 4 2 64 --gui-observation screenshot --gui-screenshot-max-pixels "${MAX_PIXELS:-230400}"

SUMMARY=$(cat <<'PY'
print(f"GUI RL (screenshots, {args.hf_checkpoint}): {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} "
      f"episodes per rollout, at most {args.max_turns} steps, one sample per step with its screenshots (at most "
      f"{args.gui_screenshot_max_pixels} pixels each); " + environments(f"tasks {args.gui_tasks_dir}"))
PY
)
agentic_cpu_launch ", the environment service as child processes (a desktop sandbox per episode)" "$SUMMARY" "$@"
