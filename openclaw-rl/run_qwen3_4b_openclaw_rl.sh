#!/usr/bin/env bash
# Binary RL on Qwen3-4B, full fine-tuning. Default layout: 8 GPUs = 4 trainer + 2 policy engine + 2 judge.
#   NUM_GPUS=8 ACTOR_GPUS=4 ROLLOUT_GPUS=2 PRM_GPUS=2 HF_CKPT=/models/Qwen3-4B-Thinking-2507 \
#   OPENCLAW_PROXY_API_KEY=... bash openclaw-rl/run_qwen3_4b_openclaw_rl.sh [extra trainer flags]
# Status: the trainer (fsdp backend) and the proxy run as on CPU; the SGLang engines, their GPU pinning and
# the megatron backend arrive with the scale-out issue (issue 7). Until then the policy and judge engines
# are our embedded engine on CUDA. Not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-8} ACTOR_GPUS=${ACTOR_GPUS:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-2} PRM_GPUS=${PRM_GPUS:-2}
HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder} PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
check_layout
cd "$ROOT"
SAVE_CKPT=${SAVE_CKPT:-$ROOT/ckpt/qwen3-4b-openclaw-rl}

launch torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
    --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "$SAVE_CKPT" --save-interval 100 \
    --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS" \
    --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "${TP:-2}" \
    --conversation-method rl --rollout-function-path openclaw_rollout.generate_rollout_openclaw \
    "${ROLLOUT_ARGS[@]}" "${GRPO_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
    --use-dynamic-batch-size --max-tokens-per-gpu 32768 --gradient-checkpointing \
    $(prm_args "${PRM_TP:-2}") \
    --device cuda \
    "$@"
