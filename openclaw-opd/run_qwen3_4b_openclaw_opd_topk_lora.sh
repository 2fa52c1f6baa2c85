#!/usr/bin/env bash
# Top-K (K=50) distillation on Qwen3-4B with LoRA (rank 16). Default layout: 4 GPUs = 2 trainer + 1 policy engine + 1 judge/teacher.
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-opd/run_qwen3_4b_openclaw_opd_topk_lora.sh [extra trainer flags]   (DRY_RUN=1 prints it)
# Status: the trainer (fsdp backend) and the proxy are as verified on CPU; SGLang engines and per-component GPU
# pinning arrive with the scale-out issue (issue 7), until then the engines are the embedded engine on CUDA.
# Not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-4} ACTOR_GPUS=${ACTOR_GPUS:-2} ROLLOUT_GPUS=${ROLLOUT_GPUS:-1} PRM_GPUS=${PRM_GPUS:-1}
HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder} PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
check_layout
cd "$ROOT"
SAVE_CKPT=${SAVE_CKPT:-$ROOT/ckpt/qwen3-4b-openclaw-opd-topk-lora}

launch torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
    --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "$SAVE_CKPT" --save-interval 1 \
    --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS" \
    --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "${TP:-1}" \
    "${ROLLOUT_ARGS[@]}" "${OPTIMIZER_ARGS[@]}" \
    --use-dynamic-batch-size --max-tokens-per-gpu "${MAX_TOKENS_PER_GPU:-8192}" --gradient-checkpointing \
    $(prm_args "${PRM_TP:-${TP:-1}}") \
    --device cuda \
    --conversation-method opd --hint-judge-type "${HINT_JUDGE:-llm}" \
    --rollout-function-path openclaw_opd_rollout.generate_rollout_openclaw_opd \
    --loss-type custom_loss --custom-loss-function-path topk_distillation_loss.topk_distillation_loss_function \
    --distill-topk "${DISTILL_TOPK:-50}" --disable-compute-advantages-and-returns --disable-rewards-normalization --entropy-coef 0.0 --lr 1e-6 \
    --train-backend fsdp --use-lora --lora-rank 16 --lora-alpha 32 \
    --lora-target-modules "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj" \
    "$@"
