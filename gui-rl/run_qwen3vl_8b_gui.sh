#!/usr/bin/env bash
# GUI RL on Qwen3-VL-8B, full fine-tuning: the policy sees the last 3 screenshots of its desktop and operates real
# apps through Qwen's computer_use tool (one desktop per episode, served by the environment service's `gui`
# provider: the local Xvfb desktops of gui-rl/tasks, or OSWorld VMs behind pool servers you start), learning from
# the task's evaluator (+1 solved, -1 otherwise). One sample per step carrying its screenshots (--dynamic-history;
# the trainer scores the prompt ids and images the engine saw), GRPO over the episode's outcome, at most 30 steps of
# 512 tokens, PPO clip 0.2/0.28, KL k3 0.01, lr 1e-6, asynchronous training; upstream's gui_qwen3vl_8b values
# (batch 4 tasks x 8 episodes, 1000 rollouts, 2 steps per rollout, rotary base 5e6).
# Hardware: one node with 8 GPUs (80 GB class): 4 trainer ranks (FSDP, no tensor parallel: the fsdp backend has no
# tensor-parallel plan for the vision tower) + 4 policy engines (TP1, SGLang mem fraction 0.85); with STEP_JUDGE=llm
# a vision-language PRM (upstream's PRM variant: Qwen3-VL-4B, PRM_CKPT) on PRM_GPUS (1) of the 8 judges every step
# from the screenshots before and after it (then ROLLOUT_GPUS defaults to 3).
# The environments: ENV_SERVER_URL (a router or pool servers elsewhere, e.g. OSWorld VMs:
# `python -m slime.agentic.env_service.pool_server --provider gui --host 0.0.0.0 --api-key ...
#  --provider-option desktop=osworld --provider-option vm_url=http://VM:5000` per VM; ENV_SERVER_API_KEY), else
# ENV_WORKERS pool servers (default 4) started by the trainer on this node (local desktops: scripts/setup_gui.sh).
#   HF_CKPT=/models/Qwen3-VL-8B-Instruct bash gui-rl/run_qwen3vl_8b_gui.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the GUI setting, the resolved GPU layout and the full command and starts nothing
# (it writes the training rows, as the flags are checked against them). Layout and multi-node variables (NUM_GPUS,
# ACTOR_GPUS, ROLLOUT_GPUS, ROLLOUT_TP, TRAIN_TP, PRM_GPUS, PRM_TP, NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT,
# ROLLOUT_ENGINE, TRAIN_BACKEND): scripts/README.md, "GPU layout".
# Env: HF_CKPT (required: a folder; nothing is downloaded), TASKS_DIR (gui-rl/tasks), APPS_DIR (gui-rl/apps),
#      PROMPT_DATA (default: the training split of the tasks, written to RUN_DIR/train.jsonl), EVAL_DATA
#      (gui-rl/data/heldout.jsonl), RUN_DIR (runs/qwen3vl-8b-gui), SAVE_CKPT (ckpt/qwen3vl-8b-gui), MAX_STEPS (30),
#      NUM_ROLLOUT (1000), ROLLOUT_BATCH_SIZE (4 tasks), N_SAMPLES (8 per task), MAX_PIXELS (none: screenshots as the
#      desktop sends them; the model's processor resizes), MEM_FRACTION_STATIC (0.85), MAX_TOKENS_PER_GPU (16384),
#      EVAL_INTERVAL (20), STEP_JUDGE (llm: the VLM PRM, PRM_CKPT required; rules: the OCR-diff judge; module:factory),
#      PRM_M (1 vote). Relative paths: from the repository root.
# Status: engines are SGLang servers (--rollout-engine sglang) taking the policy's ids with `image_data`; the trainer
# is the fsdp backend on image samples. Verified on CPU: the layout, the command and its flags by dry run
# (tests/unit/test_gui_scripts.py); the screenshot loop, the engine's image path and the trainer on image samples
# with a tiny random Qwen2.5-VL under 2-rank torchrun (tests/integration/test_gui_vlm_script.py). Not run on a GPU:
# SGLang with Qwen3-VL, a Qwen3-VL checkpoint in the trainer (only the Qwen2.5-VL architecture is tested).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "${SLIME_ROOT:-$HERE/..}" && pwd)"
cd "$ROOT"
# shellcheck source=scripts/agentic_gpu_launch.sh
source scripts/agentic_gpu_launch.sh

HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-VL-8B checkpoint (a folder; nothing is downloaded)}
STEP_JUDGE=${STEP_JUDGE:-}
if [ "$STEP_JUDGE" = llm ]; then  # upstream's PRM variant: 4 trainer + 3 policy + 1 PRM GPU(s)
    if [ -z "${PRM_CKPT:-}" ]; then
        echo "error: STEP_JUDGE=llm needs PRM_CKPT, a vision-language PRM checkpoint folder (e.g. Qwen3-VL-4B)" >&2
        exit 2
    fi
    PRM_GPUS=${PRM_GPUS:-1} ROLLOUT_GPUS=${ROLLOUT_GPUS:-3}
fi
PRM_GPUS=${PRM_GPUS:-0}
ACTOR_GPUS=${ACTOR_GPUS:-4} TRAIN_TP=${TRAIN_TP:-1} ROLLOUT_GPUS=${ROLLOUT_GPUS:-4} ROLLOUT_TP=${ROLLOUT_TP:-1}
PRM_TP=${PRM_TP:-1}
agentic_gpu_layout PRM_GPUS PRM_TP

RUN_DIR=${RUN_DIR:-runs/qwen3vl-8b-gui}
TASKS_DIR=${TASKS_DIR:-$HERE/tasks}
PROMPT_DATA=${PROMPT_DATA:-}
if [ -z "$PROMPT_DATA" ]; then  # the tasks' training rows (also on --dry-run: the flags are checked against them)
    PROMPT_DATA="$RUN_DIR/train.jsonl"
    python -m slime.agentic.gui.tasks --tasks-dir "$TASKS_DIR" --split train --out "$PROMPT_DATA" >&2
fi
ROLLOUT_ARGS=(
    --prompt-data "$PROMPT_DATA" --input-key prompt --metadata-key metadata --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_gui.generate
    --custom-rm-path generate_with_gui.reward_func --reward-key score
    --gui-tasks-dir "$TASKS_DIR" --gui-apps-dir "${APPS_DIR:-$HERE/apps}" --gui-observation screenshot
    --env-provider gui --env-workers "${ENV_WORKERS:-4}"
    --max-turns "${MAX_STEPS:-30}" --max-parse-errors 3 --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-1000}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-4}"
    --n-samples-per-prompt "${N_SAMPLES:-8}" --num-steps-per-rollout 2
    --rollout-max-response-len 512 --rollout-max-context-len "${CONTEXT_LEN:-16384}" --rollout-temperature 1
    --eval-interval "${EVAL_INTERVAL:-20}" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
    --eval-temperature 0 --eval-reward-key acc
)
if [ -n "${MAX_PIXELS:-}" ]; then
    ROLLOUT_ARGS+=(--gui-screenshot-max-pixels "$MAX_PIXELS")
fi
if [ -n "${ENV_SERVER_URL:-}" ]; then
    ROLLOUT_ARGS+=(--env-server-url "$ENV_SERVER_URL")
fi
ALGORITHM_ARGS=(--advantage-estimator grpo "${AGENTIC_PPO_ARGS[@]}")
if [ -n "$STEP_JUDGE" ]; then  # a per-step PRM: the outcome plus its score, advantages per (task, step)
    ALGORITHM_ARGS=(--advantage-estimator step_wise "${AGENTIC_PPO_ARGS[@]}" --step-judge "$STEP_JUDGE"
                    --prm-step-coef 1.0)
fi
if [ "$STEP_JUDGE" = llm ]; then
    ALGORITHM_ARGS+=(--prm-enable --prm-num-gpus "$PRM_GPUS" --prm-num-gpus-per-engine "$PRM_TP"
                     --prm-model-path "$PRM_CKPT"
                     --prm-m "${PRM_M:-1}" --prm-temperature 0.6 --prm-max-new-tokens 4096)
fi
agentic_gpu_command 5000000 "${SAVE_CKPT:-$ROOT/ckpt/qwen3vl-8b-gui}" 20 \
    --sglang-mem-fraction-static "${MEM_FRACTION_STATIC:-0.85}" "${ROLLOUT_ARGS[@]}" "${ALGORITHM_ARGS[@]}"

SUMMARY=$(cat <<'PY'
service = args.env_server_url or (f"{args.env_workers} pool server(s) started by the trainer ({args.env_provider}, "
                                  f"local desktops, tasks {args.gui_tasks_dir})")
judge = f"; step judge {args.step_judge} ({args.advantage_estimator})" if args.step_judge else ""
print(f"GUI RL (screenshots): {args.rollout_batch_size} tasks x {args.n_samples_per_prompt} episodes per rollout, at "
      f"most {args.max_turns} steps of {args.rollout_max_response_len} tokens, one sample per step with its "
      f"screenshots; environments: {service}{judge}")
PY
)
agentic_gpu_launch "$SUMMARY" "$@"
