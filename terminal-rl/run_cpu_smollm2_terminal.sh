#!/usr/bin/env bash
# Terminal RL on a CPU with SmolLM2-135M-Instruct: the policy solves the shell tasks of terminal-rl/data/train.jsonl
# (terminal-bench layout, terminal-rl/tasks/) with four shell tools (persistent tmux sessions in a bubblewrap
# sandbox per episode, served by the environment service), and learns from the task's tests (reward 2*passed/total-1).
# One sample per model turn (--dynamic-history: upstream's), GRPO over an episode's outcome, PPO clip 0.2/0.28, a KL
# anchor; the trainer and the embedded engine as one process each, the pool servers as their own processes.
#   bash terminal-rl/run_cpu_smollm2_terminal.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), PROMPT_DATA (terminal-rl/data/train.jsonl), EVAL_DATA (terminal-rl/data/heldout.jsonl),
#      TASKS_DIR (terminal-rl/tasks), ENV_SERVER_URL (attach to a running service instead of starting ENV_WORKERS
#      pool servers, default 1), RUN_DIR (runs/<this folder>-cpu), ROLLOUT_BATCH_SIZE (4 tasks), N_SAMPLES (4 per task),
#      NUM_ROLLOUT (50), MAX_STEPS (6 model turns per episode), LR (1e-6), EVAL_INTERVAL (10), STEP_JUDGE (rules: the
#      CPU rule judge scores every turn and advantages are step_wise; module:factory for your own; default none).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-cpu}  # a copy of this folder: its own
ROLLOUT_ARGS=(
    --prompt-data "${PROMPT_DATA:-$HERE/data/train.jsonl}" --input-key task --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate.generate
    --custom-rm-path generate.reward_func --reward-key score
    --terminal-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --env-workers "${ENV_WORKERS:-1}" --env-provider terminal
    --max-turns "${MAX_STEPS:-6}" --max-parse-errors 3 --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-50}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-4}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 1
    --rollout-max-response-len 256 --rollout-max-context-len 4096 --rollout-temperature 1.0
    --eval-interval "${EVAL_INTERVAL:-10}" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
    --eval-reward-key acc
)
agentic_cpu_rl_args "${ROLLOUT_ARGS[@]}"
agentic_cpu_env_args  # ENV_SERVER_URL; STEP_JUDGE: a per-turn PRM, the outcome plus its score per (task, turn)

SUMMARY=$(cat <<'PY'
print(f"terminal RL: {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} turns, one sample per turn; " + environments(f"tasks {args.terminal_tasks_dir}"))
PY
)
agentic_cpu_launch ", the environment service as child processes" "$SUMMARY" "$@"
