#!/usr/bin/env bash
# SWE RL on Qwen3-8B, full fine-tuning: the policy fixes real bugs of SWE-bench-format instances through
# mini-swe-agent's loop (THOUGHT + one bash block per step, in the instance's repository, served by the environment
# service's `swe` provider: a bubblewrap sandbox, or a Docker container per episode from the instance's image) and
# learns from the sealed evaluation (+1 resolved, -1 otherwise). One sample per step (--dynamic-history), GRPO over
# the episode's outcome, at most 20 steps of 4096 tokens in a 16384-token context, PPO clip 0.2/0.28, KL k3 0.01,
# lr 1e-6, asynchronous training; upstream's SWE values (its 8B script: 8 instances x 4 episodes, 500 rollouts, 2
# episodes at once; its KL coefficient is not recorded, the 32B scripts use 0: pass --kl-loss-coef 0).
# Hardware: one node with 8 GPUs (80 GB class): 4 trainer ranks (tensor parallel 4) + 2 policy engines (TP2, SGLang
# mem fraction 0.6). The environments: ENV_SERVER_URL (a router or pool server on other hosts:
# `python -m slime.agentic.env_service.pool_server --provider swe --host 0.0.0.0 --api-key ...` per worker node,
# `python -m slime.agentic.env_service.router --workers URL,URL` in front; ENV_SERVER_API_KEY), else ENV_WORKERS pool
# servers (default 4) started by the trainer on this node.
#   HF_CKPT=/models/Qwen3-8B bash swe-rl/run_qwen3_8b_swe.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the SWE setting, the resolved GPU layout and the full command and starts nothing
# (it writes the training rows, as the flags are checked against them). Layout and multi-node variables (NUM_GPUS,
# ACTOR_GPUS, ROLLOUT_GPUS, ROLLOUT_TP, TRAIN_TP, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, ROLLOUT_ENGINE,
# TRAIN_BACKEND): scripts/README.md, "GPU layout".
# Env: HF_CKPT (required: a folder; nothing is downloaded), INSTANCES (swe-rl/data/instances.jsonl; any SWE-bench
#      JSONL), PROMPT_DATA (default: the training rows of every instance, written to RUN_DIR/train.jsonl), RUN_DIR
#      (runs/qwen3-8b-swe), SWE_BACKEND (bwrap, or docker), SWE_IMAGE (with docker: swebench, swe-gym or an image
#      template with {instance_id}), SAVE_CKPT (ckpt/qwen3-8b-swe), MAX_STEPS (20 steps per episode), CONTEXT_LEN
#      (16384; upstream's 8B script without dynamic history used 32768), NUM_ROLLOUT (500), ROLLOUT_BATCH_SIZE (8
#      instances), N_SAMPLES (4 per instance), SWE_MAX_CONCURRENT (2 episodes in flight, rounded up to a multiple of
#      the engines), MEM_FRACTION_STATIC (0.6), MAX_TOKENS_PER_GPU (16384). Defaults: this folder's (a copy runs its
#      own); relative paths given: from the repository root.
# Status: engines are SGLang servers (--rollout-engine sglang), each pinned to its own GPUs; the trainer is the fsdp
# backend. Verified on CPU by dry run only (tests/unit/test_launch_scripts.py: the layout, the command and its
# flags); the environment service and the agent loop are verified on CPU with the tiny model and SmolLM2
# (swe-rl/run_cpu_smollm2_swe.sh); not yet run on a GPU machine.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "${SLIME_ROOT:-$HERE/..}" && pwd)"
cd "$ROOT"
# shellcheck source=scripts/agentic_gpu_launch.sh
source scripts/agentic_gpu_launch.sh

HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-8B checkpoint (a folder; nothing is downloaded)}
SWE_MAX_CONCURRENT=${SWE_MAX_CONCURRENT:-2}
agentic_gpu_layout SWE_MAX_CONCURRENT
if [ "$SWE_MAX_CONCURRENT" = 0 ]; then
    echo "error: SWE_MAX_CONCURRENT must be at least 1" >&2; exit 2
fi
# upstream's SWE_MAX_CONCURRENT bounds the episodes in flight (LLM time included); here the rollout's semaphore does,
# --sglang-server-concurrency per engine
engines=1
if [ "$ROLLOUT_TP" -gt 0 ] && [ "$ROLLOUT_GPUS" -ge "$ROLLOUT_TP" ]; then  # else slime.launch reports the layout
    engines=$((ROLLOUT_GPUS / ROLLOUT_TP))
fi
per_engine=$(((SWE_MAX_CONCURRENT + engines - 1) / engines))

RUN_DIR=${RUN_DIR:-runs/qwen3-8b-swe}
INSTANCES=${INSTANCES:-$HERE/data/instances.jsonl}
PROMPT_DATA=${PROMPT_DATA:-}
if [ -z "$PROMPT_DATA" ]; then  # the instances' training rows (also on --dry-run: the flags are checked against them)
    PROMPT_DATA="$RUN_DIR/train.jsonl"
    python -m slime.agentic.swe.instances --instances "$INSTANCES" --out "$PROMPT_DATA" >&2
fi
ROLLOUT_ARGS=(
    --prompt-data "$PROMPT_DATA" --input-key text --metadata-key metadata --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_swe_remote.generate
    --custom-rm-path generate_with_swe_remote.reward_func --reward-key score
    --swe-instances "$INSTANCES" --swe-backend "${SWE_BACKEND:-bwrap}" --env-provider swe
    --env-workers "${ENV_WORKERS:-4}" --max-turns "${MAX_STEPS:-20}" --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-500}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-8}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 2 --sglang-server-concurrency "$per_engine"
    --rollout-max-response-len 4096 --rollout-max-context-len "${CONTEXT_LEN:-16384}" --rollout-temperature 1
    --run-dir "$RUN_DIR"
)
if [ -n "${SWE_IMAGE:-}" ]; then
    ROLLOUT_ARGS+=(--swe-image "$SWE_IMAGE")
fi
if [ -n "${ENV_SERVER_URL:-}" ]; then
    ROLLOUT_ARGS+=(--env-server-url "$ENV_SERVER_URL")
fi
ALGORITHM_ARGS=(--advantage-estimator grpo "${AGENTIC_PPO_ARGS[@]}")
agentic_gpu_command 1000000 "${SAVE_CKPT:-$ROOT/ckpt/qwen3-8b-swe}" 2 \
    --sglang-mem-fraction-static "${MEM_FRACTION_STATIC:-0.6}" "${ROLLOUT_ARGS[@]}" "${ALGORITHM_ARGS[@]}"

SUMMARY=$(cat <<'PY'
engines = max(1, args.rollout_num_gpus // max(1, args.rollout_num_gpus_per_engine))
service = args.env_server_url or (f"{args.env_workers} pool server(s) started by the trainer ({args.env_provider}, "
                                  f"backend {args.swe_backend}"
                                  + (f", image {args.swe_image}" if args.swe_image else "")
                                  + f", instances {args.swe_instances})")
print(f"SWE RL: {args.rollout_batch_size} instances x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} steps of {args.rollout_max_response_len} tokens in {args.rollout_max_context_len}, one "
      f"sample per step, {args.sglang_server_concurrency * engines} episode(s) at once; environments: {service}")
PY
)
agentic_gpu_launch "$SUMMARY" "$@"
