#!/usr/bin/env bash
# Binary RL on Qwen3-4B with LoRA (rank 16). Default layout: 4 GPUs = 2 trainer + 1 policy engine + 1 judge.
#   NUM_GPUS=4 ACTOR_GPUS=2 ROLLOUT_GPUS=1 PRM_GPUS=1 HF_CKPT=/models/Qwen3-4B \
#   OPENCLAW_PROXY_API_KEY=... bash openclaw-rl/run_qwen3_4b_openclaw_rl_lora.sh [extra trainer flags]
# Status: as run_qwen3_4b_openclaw_rl.sh (SGLang engines and GPU pinning arrive with issue 7; not yet run
# on a GPU machine). Only the adapter is trained and published to the engine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-4} ACTOR_GPUS=${ACTOR_GPUS:-2} ROLLOUT_GPUS=${ROLLOUT_GPUS:-1} PRM_GPUS=${PRM_GPUS:-1}
HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder} PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
check_layout
cd "$ROOT"
SAVE_CKPT=${SAVE_CKPT:-$ROOT/ckpt/qwen3-4b-openclaw-rl-lora}

launch torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
    --train-backend fsdp --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "$SAVE_CKPT" --save-interval 1 \
    --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS" \
    --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "${TP:-1}" \
    --conversation-method rl --rollout-function-path openclaw_rollout.generate_rollout_openclaw \
    "${ROLLOUT_ARGS[@]}" "${GRPO_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
    --use-dynamic-batch-size --max-tokens-per-gpu "${MAX_TOKENS_PER_GPU:-8192}" --gradient-checkpointing \
    --use-lora --lora-rank 16 --lora-alpha 32 \
    --lora-target-modules "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj" \
    $(prm_args "${PRM_TP:-${TP:-1}}") \
    --device cuda \
    "$@"
