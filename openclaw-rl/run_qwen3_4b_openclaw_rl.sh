#!/usr/bin/env bash
# Binary RL on Qwen3-4B, full fine-tuning. Default layout: 8 GPUs = 4 trainer + 2 policy engine + 2 judge.
#   NUM_GPUS=8 ACTOR_GPUS=4 ROLLOUT_GPUS=2 PRM_GPUS=2 HF_CKPT=/models/Qwen3-4B-Thinking-2507 \
#   OPENCLAW_PROXY_API_KEY=... bash openclaw-rl/run_qwen3_4b_openclaw_rl.sh [extra trainer flags]
# Status: the trainer (fsdp backend) and the proxy run as on CPU; the SGLang engines, their GPU pinning and
# the megatron backend arrive with the scale-out issue (issue 7). Until then the policy and judge engines
# are our embedded engine on CUDA. Not yet run on a GPU machine.
# shellcheck source=openclaw-rl/_gpu_common.sh
source "$(dirname "$0")/_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-8} ACTOR_GPUS=${ACTOR_GPUS:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-2} PRM_GPUS=${PRM_GPUS:-2}
HF_CKPT=${HF_CKPT:?set HF_CKPT to a Qwen3-4B checkpoint folder} PRM_MODEL_PATH=${PRM_MODEL_PATH:-$HF_CKPT}
check_layout
cd "$ROOT"
SAVE_CKPT=${SAVE_CKPT:-$ROOT/ckpt/qwen3-4b-openclaw-rl}

exec torchrun --nproc_per_node="$ACTOR_GPUS" --master_port "${MASTER_PORT:-29500}" slime/train_async.py \
    --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --save "$SAVE_CKPT" --save-interval 100 \
    --actor-num-nodes 1 --actor-num-gpus-per-node "$ACTOR_GPUS" --rollout-num-gpus "$ROLLOUT_GPUS" \
    --num-gpus-per-node "$NUM_GPUS" --rollout-num-gpus-per-engine "${TP:-2}" \
    --disable-rollout-global-dataset \
    --rollout-function-path openclaw_rollout.generate_rollout_openclaw \
    --data-source-path slime.conversation.rollout.ConversationDataSource --extra-python-path "$HERE" \
    --num-rollout 100000000 --rollout-batch-size 16 --n-samples-per-prompt 1 --num-steps-per-rollout 1 \
    --rollout-max-response-len 8192 --rollout-max-context-len 32768 --rollout-temperature 0.6 --reward-key score \
    --use-dynamic-batch-size --max-tokens-per-gpu 32768 --gradient-checkpointing \
    --advantage-estimator grpo --disable-rewards-normalization --kl-loss-coef 0.0 --kl-loss-type low_var_kl \
    --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28 \
    --optimizer adam --lr 1e-5 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98 \
    --prm-enable --prm-num-gpus "$PRM_GPUS" --prm-num-gpus-per-engine "${PRM_TP:-2}" \
    --prm-model-path "$PRM_MODEL_PATH" --prm-type llm --prm-m "${PRM_M:-3}" \
    --prm-temperature "${PRM_TEMPERATURE:-0.6}" --prm-max-new-tokens "${PRM_MAX_NEW_TOKENS:-4096}" \
    --device cuda \
    "$@"
