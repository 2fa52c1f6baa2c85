#!/usr/bin/env bash
# Combine (Binary RL + OPD) on Qwen3-4B, full fine-tuning. Default layout: 8 GPUs = 4 trainer + 2 policy engine + 2 judge/teacher.
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-combine/run_qwen3_4b_openclaw_combine.sh [extra trainer flags]   (DRY_RUN=1 prints it)
# Status: the trainer (fsdp backend) and the proxy are as verified on CPU; SGLang engines and per-component GPU
# pinning arrive with the scale-out issue (issue 7), until then the engines are the embedded engine on CUDA.
# Not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-8} ACTOR_GPUS=${ACTOR_GPUS:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-2} PRM_GPUS=${PRM_GPUS:-2}
HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder} PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
check_layout
cd "$ROOT"
SAVE_CKPT=${SAVE_CKPT:-$ROOT/ckpt/qwen3-4b-openclaw-combine}

launch torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
    --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "$SAVE_CKPT" --save-interval 1 \
    --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS" \
    --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "${TP:-1}" \
    "${ROLLOUT_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
    --use-dynamic-batch-size --max-tokens-per-gpu "${MAX_TOKENS_PER_GPU:-8192}" --gradient-checkpointing \
    $(prm_args "${PRM_TP:-${TP:-1}}") \
    --device cuda \
    --conversation-method combine --hint-judge-type "${HINT_JUDGE:-llm}" \
    --rollout-function-path openclaw_combine_rollout.generate_rollout_openclaw_combine \
    "${GRPO_ARGS[@]}" --loss-type custom_loss --custom-loss-function-path combine_loss.combine_loss_function \
    "$@"
