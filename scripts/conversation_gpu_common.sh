# Shared by the Qwen3-4B GPU launch scripts of the conversation method folders (sourced, not run by itself).
#
# A script sets its default layout, then calls
#     run_conversation_trainer <full|lora> <method> [extra trainer flags]
# <method> is any name of the method registry (slime/slime/conversation/methods/registry.py) or a plugin
# 'module:factory' from the calling folder; the method chooses its own loss and advantage estimator.
# The checkpoint folder is named after the script (run_qwen3_4b_openclaw_rl.sh -> ckpt/qwen3-4b-openclaw-rl), and
# after the folder too when the script's name does not say it (a fork my-rl/ -> ckpt/my-rl-qwen3-4b-openclaw-rl).
#
# Layout (env; see scripts/README.md "GPU layout"): NUM_GPUS per node, NNODES, NODE_RANK, MASTER_ADDR,
# MASTER_PORT, ACTOR_GPUS trainer GPUs per node, ROLLOUT_GPUS / PRM_GPUS policy / judge engine GPUs in total,
# ROLLOUT_TP / PRM_TP GPUs per engine, TRAIN_TP trainer tensor parallel. The layout is resolved and validated
# by `python -m slime.launch` (slime/slime/launch/) before anything starts.
#
# `--dry-run` anywhere among a run_*.sh's arguments (or DRY_RUN=1) prints the resolved layout and the full
# command and starts nothing. Launch scripts never kill processes by name: the launcher execs torchrun.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"  # the calling method folder
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRIPT_NAME="$(basename "$0" .sh)"

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
# PPO clip and no KL (upstream's values); the method chooses its loss and advantage estimator itself
PPO_ARGS=(--kl-loss-coef 0.0 --kl-loss-type low_var_kl --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28)
OPTIMIZER_ARGS=(--optimizer adam --lr 1e-5 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9
                --adam-beta2 0.98)
# SGLang server settings of the policy and judge engines (upstream's values for Qwen3-4B).
SGLANG_ARGS=(--sglang-mem-fraction-static "${MEM_FRACTION_STATIC:-0.85}" --sglang-context-length "${CONTEXT_LENGTH:-32768}"
             --sglang-reasoning-parser "${REASONING_PARSER:-qwen3}" --sglang-tool-call-parser "${TOOL_CALL_PARSER:-qwen25}")
LORA_ARGS=(--use-lora --lora-rank 16 --lora-alpha 32
           --lora-target-modules "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
# Integers only; ranges and the combination are checked by slime.launch, with the variable names in its messages.
check_layout_numbers() {
    local name
    for name in NUM_GPUS NNODES NODE_RANK ACTOR_GPUS ROLLOUT_GPUS ROLLOUT_TP PRM_GPUS PRM_TP TRAIN_TP MASTER_PORT; do
        if ! [[ "${!name}" =~ ^[0-9]+$ ]]; then
            echo "error: $name must be a non-negative integer, got '${!name}'" >&2; exit 2
        fi
    done
}

# Everything but the method: run_conversation_trainer <full|lora> <method> [extra trainer flags]
# Defaults of the layout variables are set by the calling script before this runs.
run_conversation_trainer() {
    local variant=$1 method=$2 tokens interval name folder arg passed=()
    shift 2
    for arg in "$@"; do  # --dry-run may come anywhere: take it out of the trainer flags
        if [ "$arg" = --dry-run ]; then DRY_RUN=1; else passed+=("$arg"); fi
    done
    set -- "${passed[@]}"
    HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder}
    PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
    NNODES=${NNODES:-1} NODE_RANK=${NODE_RANK:-0} MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
    MASTER_PORT=${MASTER_PORT:-29500} TRAIN_TP=${TRAIN_TP:-1} ROLLOUT_ENGINE=${ROLLOUT_ENGINE:-sglang}
    ROLLOUT_TP=${ROLLOUT_TP:-${TP:-$DEFAULT_ENGINE_TP}}  # TP: the name older scripts used
    PRM_TP=${PRM_TP:-$ROLLOUT_TP}
    export NNODES NODE_RANK MASTER_ADDR MASTER_PORT
    check_layout_numbers
    name=${SCRIPT_NAME#run_}
    name=${name//_/-}
    folder=$(basename "$HERE")
    if [[ "$name" != *"$folder"* ]]; then  # a fork of the folder: its own checkpoint folder, not the original's
        name="$folder-$name"
    fi
    local extra=()
    if [ "$variant" = lora ]; then
        tokens=${MAX_TOKENS_PER_GPU:-8192} interval=1
        extra=(--train-backend fsdp "${LORA_ARGS[@]}")
    else
        tokens=${MAX_TOKENS_PER_GPU:-32768} interval=100
        extra=(--train-backend "${TRAIN_BACKEND:-fsdp}")
    fi
    cd "$ROOT"
    local launcher=(python -m slime.launch)
    if [ "${DRY_RUN:-0}" = 1 ]; then
        launcher+=(--dry-run)
    fi
    exec "${launcher[@]}" slime/train_async.py \
        --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "${SAVE_CKPT:-$ROOT/ckpt/$name}" \
        --save-interval "$interval" \
        --actor-num-nodes "$NNODES" --actor-num-gpus-per-node "$ACTOR_GPUS" --num-gpus-per-node "$NUM_GPUS" \
        --tensor-model-parallel-size "$TRAIN_TP" \
        --rollout-engine "$ROLLOUT_ENGINE" --rollout-num-gpus "$ROLLOUT_GPUS" --rollout-num-gpus-per-engine "$ROLLOUT_TP" \
        --prm-enable --prm-num-gpus "$PRM_GPUS" --prm-num-gpus-per-engine "$PRM_TP" --prm-model-path "$PRM_MODEL_PATH" \
        --prm-type llm --prm-m "${PRM_M:-3}" --prm-temperature "${PRM_TEMPERATURE:-0.6}" \
        --prm-max-new-tokens "${PRM_MAX_NEW_TOKENS:-4096}" \
        "${SGLANG_ARGS[@]}" "${ROLLOUT_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
        --use-dynamic-batch-size --max-tokens-per-gpu "$tokens" --gradient-checkpointing \
        --device cuda "${extra[@]}" "${PPO_ARGS[@]}" \
        --conversation-method "$method" --hint-judge-type "${HINT_JUDGE:-llm}" "$@"
}
