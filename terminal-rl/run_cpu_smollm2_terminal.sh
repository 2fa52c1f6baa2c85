#!/usr/bin/env bash
# Terminal RL on a CPU with SmolLM2-135M-Instruct: the policy solves the shell tasks of terminal-rl/data/train.jsonl
# (terminal-bench layout, terminal-rl/tasks/) with four shell tools (persistent tmux sessions in a bubblewrap
# sandbox per episode, served by the environment service), and learns from the task's tests (reward 2*passed/total-1).
# One sample per model turn (--dynamic-history: upstream's), GRPO over an episode's outcome, PPO clip 0.2/0.28, a KL
# anchor; the trainer and the embedded engine as one process each, the pool servers as their own processes.
#   bash terminal-rl/run_cpu_smollm2_terminal.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), PROMPT_DATA (terminal-rl/data/train.jsonl), EVAL_DATA (terminal-rl/data/heldout.jsonl),
#      TASKS_DIR (terminal-rl/tasks), ENV_SERVER_URL (attach to a running service instead of starting ENV_WORKERS
#      pool servers, default 1), RUN_DIR (runs/terminal-cpu), ROLLOUT_BATCH_SIZE (4 tasks), N_SAMPLES (4 per task),
#      NUM_ROLLOUT (50), MAX_STEPS (6 model turns per episode), LR (1e-6), EVAL_INTERVAL (10), STEP_JUDGE (rules: the
#      CPU rule judge scores every turn and advantages are step_wise; module:factory for your own; default none).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/cpu_launch_env.sh
source scripts/cpu_launch_env.sh
RUN_DIR=${RUN_DIR:-runs/terminal-cpu}
ARGS=(
    --hf-checkpoint "${HF_CKPT:-smollm2}"
    --prompt-data "${PROMPT_DATA:-$HERE/data/train.jsonl}" --input-key task
    --custom-generate-function-path slime.agentic.terminal.agent.generate
    --custom-rm-path slime.agentic.terminal.agent.reward_func --reward-key score
    --terminal-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --env-workers "${ENV_WORKERS:-1}" --env-provider terminal
    --max-turns "${MAX_STEPS:-6}" --max-parse-errors 3 --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-50}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-4}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 1
    --rollout-max-response-len 256 --rollout-max-context-len 4096 --rollout-temperature 1.0
    --eval-interval "${EVAL_INTERVAL:-10}" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
    --eval-reward-key acc
    --advantage-estimator grpo --eps-clip 0.2 --eps-clip-high 0.28
    --use-kl-loss --kl-loss-coef 0.01 --kl-loss-type low_var_kl
    --lr "${LR:-1e-6}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10
)
if [ -n "${ENV_SERVER_URL:-}" ]; then
    ARGS+=(--env-server-url "$ENV_SERVER_URL")
fi
if [ -n "${STEP_JUDGE:-}" ]; then  # a per-turn PRM: the outcome plus its score, normalised per (task, turn)
    ARGS+=(--step-judge "$STEP_JUDGE" --advantage-estimator step_wise --prm-step-coef 1.0)
fi
if [ "$DRY_RUN" = 1 ]; then
    python - "${ARGS[@]}" "$@" <<'PY'
import shlex, sys
from slime.utils.arguments import parse_args
args = parse_args(sys.argv[1:], mode="async", world_size=1)
service = args.env_server_url or f"{args.env_workers} pool server(s) started by the trainer ({args.env_provider}, " \
                                  f"tasks {args.terminal_tasks_dir})"
print("layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process, the "
      "environment service as child processes; OMP_NUM_THREADS=1 per process")
print(f"terminal RL: {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} turns, one sample per turn; environments: {service}"
      + (f"; step judge {args.step_judge}, advantages {args.advantage_estimator}" if args.step_judge else ""))
print("python slime/train_async.py " + shlex.join(sys.argv[1:]))
PY
    exit 0
fi
exec python slime/train_async.py "${ARGS[@]}" "$@"
