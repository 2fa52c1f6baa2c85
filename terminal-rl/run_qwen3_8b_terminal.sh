#!/usr/bin/env bash
# Terminal RL on Qwen3-8B, full fine-tuning: the policy solves terminal-bench-layout shell tasks through four shell
# tools (persistent tmux sessions in a sandbox per episode, served by the environment service) and learns from the
# task's tests (reward 2*passed/total - 1). One sample per model turn (--dynamic-history), GRPO over an episode's
# outcome, PPO clip 0.2/0.28, KL k3 0.01, lr 1e-6, asynchronous training; upstream's terminal_qwen3_8b_rl.sh values.
# Hardware: one node with 8 GPUs (80 GB class): 4 trainer ranks (tensor parallel 4) + 2 policy engines (TP2, SGLang
# mem fraction 0.6). The environments: ENV_SERVER_URL (a router or pool server on other hosts:
# `python -m slime.agentic.env_service.pool_server --provider terminal --host 0.0.0.0 --api-key ...` per worker node,
# `python -m slime.agentic.env_service.router --workers URL,URL` in front; ENV_SERVER_API_KEY), else ENV_WORKERS pool
# servers (default 4) started by the trainer on this node.
#   HF_CKPT=/models/Qwen3-8B bash terminal-rl/run_qwen3_8b_terminal.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the terminal setting, the resolved GPU layout and the full command and starts
# nothing. Layout and multi-node variables (NUM_GPUS, ACTOR_GPUS, ROLLOUT_GPUS, ROLLOUT_TP, TRAIN_TP, NNODES,
# NODE_RANK, MASTER_ADDR, MASTER_PORT, ROLLOUT_ENGINE, TRAIN_BACKEND): scripts/README.md, "GPU layout".
# Env: HF_CKPT (required: a folder; nothing is downloaded), PROMPT_DATA (terminal-rl/data/train.jsonl), EVAL_DATA
#      (terminal-rl/data/heldout.jsonl), TASKS_DIR (terminal-rl/tasks), SAVE_CKPT (ckpt/qwen3-8b-terminal),
#      MAX_STEPS (10 model turns), NUM_ROLLOUT (2000), ROLLOUT_BATCH_SIZE (16 tasks), N_SAMPLES (8 per task),
#      MEM_FRACTION_STATIC (0.6), MAX_TOKENS_PER_GPU (16384), EVAL_INTERVAL (20). Defaults: this script's folder (a
#      copy runs its own data, tasks and generate.py); relative paths given: from the repository root.
# Status: engines are SGLang servers (--rollout-engine sglang), each pinned to its own GPUs; the trainer is the fsdp
# backend. The layout, the command and its flags are verified on CPU (tests/unit/test_launch_scripts.py); the
# environment service and the agent loop are verified on CPU with the tiny model and SmolLM2; not yet run on a GPU
# machine.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "${SLIME_ROOT:-$HERE/..}" && pwd)"
cd "$ROOT"
# shellcheck source=scripts/agentic_gpu_launch.sh
source scripts/agentic_gpu_launch.sh

HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-8B checkpoint (a folder; nothing is downloaded)}
agentic_gpu_layout

ROLLOUT_ARGS=(
    --prompt-data "${PROMPT_DATA:-$HERE/data/train.jsonl}" --input-key task --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate.generate
    --custom-rm-path generate.reward_func --reward-key score
    --terminal-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --env-provider terminal --env-workers "${ENV_WORKERS:-4}"
    --max-turns "${MAX_STEPS:-10}" --max-parse-errors 3 --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-2000}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-16}"
    --n-samples-per-prompt "${N_SAMPLES:-8}" --num-steps-per-rollout 2
    --rollout-max-response-len 8192 --rollout-max-context-len 16384 --rollout-temperature 1
    --balance-data  # upstream's; accepted, no effect on our backends (dynamic batches are packed by tokens)
    --eval-interval "${EVAL_INTERVAL:-20}" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
    --eval-reward-key acc
)
if [ -n "${ENV_SERVER_URL:-}" ]; then
    ROLLOUT_ARGS+=(--env-server-url "$ENV_SERVER_URL")
fi
ALGORITHM_ARGS=(--advantage-estimator grpo "${AGENTIC_PPO_ARGS[@]}")
agentic_gpu_command 1000000 "${SAVE_CKPT:-$ROOT/ckpt/qwen3-8b-terminal}" 3 \
    --sglang-mem-fraction-static "${MEM_FRACTION_STATIC:-0.6}" "${ROLLOUT_ARGS[@]}" "${ALGORITHM_ARGS[@]}"

SUMMARY=$(cat <<'PY'
service = args.env_server_url or f"{args.env_workers} pool server(s) started by the trainer"
print(f"terminal RL: {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} turns, one sample per turn, tasks {args.terminal_tasks_dir}, environments: {service}")
PY
)
agentic_gpu_launch "$SUMMARY" "$@"
