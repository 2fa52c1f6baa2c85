# Shared by the Qwen3-4B GPU launch scripts of the conversation method folders (sourced, not run).
# Validates the GPU layout up front and prints it; never kills processes by name.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"  # the calling method folder
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

check_layout() {
    local total name
    for name in NUM_GPUS ACTOR_GPUS ROLLOUT_GPUS PRM_GPUS; do
        if ! [[ "${!name}" =~ ^[0-9]+$ ]]; then
            echo "error: $name must be a non-negative integer, got '${!name}'" >&2; exit 2
        fi
    done
    total=$((ACTOR_GPUS + ROLLOUT_GPUS + PRM_GPUS))
    if [ "$ACTOR_GPUS" -lt 1 ] || [ "$ROLLOUT_GPUS" -lt 1 ]; then
        echo "error: ACTOR_GPUS and ROLLOUT_GPUS must be >= 1 (got $ACTOR_GPUS, $ROLLOUT_GPUS)" >&2; exit 2
    fi
    if [ "$total" -gt "$NUM_GPUS" ]; then
        echo "error: ACTOR_GPUS + ROLLOUT_GPUS + PRM_GPUS = $total exceeds NUM_GPUS=$NUM_GPUS" >&2; exit 2
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        local have
        have=$(nvidia-smi -L | wc -l)
        if [ "$have" -lt "$NUM_GPUS" ]; then
            echo "error: NUM_GPUS=$NUM_GPUS but nvidia-smi lists $have GPU(s)" >&2; exit 2
        fi
    fi
    echo "layout: trainer GPUs 0..$((ACTOR_GPUS - 1)) | policy engine GPUs $ACTOR_GPUS..$((ACTOR_GPUS + ROLLOUT_GPUS - 1))" \
         "| judge GPUs $((ACTOR_GPUS + ROLLOUT_GPUS))..$((total - 1)) (PRM_GPUS=$PRM_GPUS) | proxy http://$HOST:$PORT/v1"
}

if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$ROOT/.venv/bin/activate" ]; then
    # shellcheck disable=SC1091
    . "$ROOT/.venv/bin/activate"
fi
export HOST=${HOST:-0.0.0.0} PORT=${PORT:-30000} SERVED_MODEL_NAME=${SERVED_MODEL_NAME:-qwen3-4b}
if [ "$HOST" != "127.0.0.1" ] && [ "$HOST" != "localhost" ] && [ -z "${OPENCLAW_PROXY_API_KEY:-}" ]; then
    echo "error: HOST=$HOST exposes the proxy: set OPENCLAW_PROXY_API_KEY (clients send it as the bearer key)" >&2
    exit 2
fi

# Flags every Qwen3-4B conversation script shares (upstream's values; see the method READMEs).
ROLLOUT_ARGS=(
    --disable-rollout-global-dataset
    --data-source-path slime.conversation.rollout.ConversationDataSource --extra-python-path "$HERE"
    --num-rollout 100000000 --rollout-batch-size 16 --n-samples-per-prompt 1 --num-steps-per-rollout 1
    --rollout-max-response-len 8192 --rollout-max-context-len 32768 --rollout-temperature 0.6 --reward-key score
)
GRPO_ARGS=(
    --advantage-estimator grpo --disable-rewards-normalization --kl-loss-coef 0.0 --kl-loss-type low_var_kl
    --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28
)
OPTIMIZER_ARGS=(--optimizer adam --lr 1e-5 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9
                --adam-beta2 0.98)
prm_args() {  # $1: judge engine tensor-parallel size
    echo --prm-enable --prm-num-gpus "$PRM_GPUS" --prm-num-gpus-per-engine "$1" --prm-model-path "$PRM_MODEL_PATH" \
         --prm-type llm --prm-m "${PRM_M:-3}" --prm-temperature "${PRM_TEMPERATURE:-0.6}" \
         --prm-max-new-tokens "${PRM_MAX_NEW_TOKENS:-4096}"
}

launch() {  # DRY_RUN=1 prints the command (shell-quoted) instead of running it
    if [ "${DRY_RUN:-0}" = 1 ]; then
        printf '%q ' "$@"; echo
    else
        exec "$@"
    fi
}

LORA_ARGS=(--train-backend fsdp --use-lora --lora-rank 16 --lora-alpha 32
           --lora-target-modules "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")

# Everything but the method: run_conversation_trainer <checkpoint name> <full|lora> <method flags...> "$@"
run_conversation_trainer() {
    local name=$1 variant=$2 tp tokens interval
    shift 2
    HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder}
    PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
    check_layout
    cd "$ROOT"
    local extra=()
    if [ "$variant" = lora ]; then
        tp=${TP:-1} tokens=${MAX_TOKENS_PER_GPU:-8192} interval=1 extra=("${LORA_ARGS[@]}")
    else
        tp=${TP:-2} tokens=${MAX_TOKENS_PER_GPU:-32768} interval=100
    fi
    # shellcheck disable=SC2046  # prm_args prints words on purpose
    launch torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
        --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "${SAVE_CKPT:-$ROOT/ckpt/$name}" \
        --save-interval "$interval" --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" \
        --rollout-num-gpus "$ROLLOUT_GPUS" --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "$tp" \
        "${ROLLOUT_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
        --use-dynamic-batch-size --max-tokens-per-gpu "$tokens" --gradient-checkpointing \
        $(prm_args "${PRM_TP:-$tp}") --device cuda "${extra[@]}" "$@"
}
