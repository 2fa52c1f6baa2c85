#!/usr/bin/env bash
# Binary RL from live conversations on a CPU with the embedded default, SmolLM2-135M-Instruct.
#
# Serves an OpenAI-compatible API on http://$HOST:$PORT/v1 (default 127.0.0.1:30000); every main-line
# turn is judged from the next message by the CPU judge (explicit-feedback rules, then MiniLM embeddings)
# and trains the policy in the background (async GRPO-style PPO, one sample per judged turn).
# Runs until Ctrl-C, which finishes the current step, checkpoints and stops the engine and proxy.
#
#   bash openclaw-rl/run_cpu_smollm2_openclaw_rl.sh [extra trainer flags]
#
# Env: HOST, PORT, OPENCLAW_PROXY_API_KEY (required if HOST is not loopback), SERVED_MODEL_NAME,
#      RUN_DIR (default runs/openclaw-rl-cpu), ROLLOUT_BATCH_SIZE (default 8), PRM_TYPE (default
#      rules+embedding; "llm" makes the policy engine judge), LR (default 1e-5), NUM_ROLLOUT.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
cd "$ROOT"
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HOST=${HOST:-127.0.0.1} PORT=${PORT:-30000}
RUN_DIR=${RUN_DIR:-runs/openclaw-rl-cpu}

ROLLOUT_ARGS=(
    --disable-rollout-global-dataset
    --rollout-function-path openclaw_rollout.generate_rollout_openclaw
    --data-source-path slime.conversation.rollout.ConversationDataSource
    --extra-python-path "$HERE"
    --num-rollout "${NUM_ROLLOUT:-100000000}"
    --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-8}" --n-samples-per-prompt 1 --num-steps-per-rollout 1
    --rollout-max-response-len 512 --rollout-temperature 0.6 --reward-key score
)
GRPO_ARGS=(
    --advantage-estimator grpo --disable-rewards-normalization
    --kl-loss-coef 0.0 --kl-loss-type low_var_kl --entropy-coef 0.0
    --eps-clip 0.2 --eps-clip-high 0.28
)
OPTIMIZER_ARGS=(--lr "${LR:-1e-5}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98)
PRM_ARGS=(--prm-type "${PRM_TYPE:-rules+embedding}" --prm-m "${PRM_M:-3}" --prm-temperature 0.6
          --prm-max-new-tokens 512)

# One trainer process: started directly (a group of one), so Ctrl-C reaches the trainer's clean-stop handler.
exec python slime/train_async.py \
    --hf-checkpoint smollm2 \
    "${ROLLOUT_ARGS[@]}" "${GRPO_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" "${PRM_ARGS[@]}" \
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10 \
    "$@"
