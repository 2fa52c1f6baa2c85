#!/usr/bin/env bash
# Shared body of the CPU launch scripts of the conversation methods (openclaw-rl, -opd, -combine): the trainer
# on SmolLM2-135M-Instruct with the conversation proxy in front of the embedded engine. Not run by itself:
#   bash scripts/conversation_cpu.sh <run name> <method flags...> [extra trainer flags]
# Env: HOST, PORT, OPENCLAW_PROXY_API_KEY (required if HOST is not loopback), SERVED_MODEL_NAME, RUN_DIR
#      (default runs/<run name>), ROLLOUT_BATCH_SIZE (8), PRM_TYPE (rules+embedding), LR (1e-5), NUM_ROLLOUT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
NAME=$1
shift
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export HOST=${HOST:-127.0.0.1} PORT=${PORT:-30000}
RUN_DIR=${RUN_DIR:-runs/$NAME}

COMMON_ARGS=(
    --hf-checkpoint smollm2
    --disable-rollout-global-dataset
    --data-source-path slime.conversation.rollout.ConversationDataSource
    --num-rollout "${NUM_ROLLOUT:-100000000}"
    --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-8}" --n-samples-per-prompt 1 --num-steps-per-rollout 1
    --rollout-max-response-len 512 --rollout-temperature 0.6 --reward-key score
    --lr "${LR:-1e-5}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
    --prm-type "${PRM_TYPE:-rules+embedding}" --prm-m "${PRM_M:-3}" --prm-temperature 0.6 --prm-max-new-tokens 512
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10
)
# One trainer process: started directly (a group of one), so Ctrl-C reaches the trainer's clean-stop handler.
exec python slime/train_async.py "${COMMON_ARGS[@]}" "$@"
