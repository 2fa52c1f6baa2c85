#!/usr/bin/env bash
# Binary RL on Qwen3-4B with LoRA (rank 16). Default layout: 4 GPUs = 2 trainer + 1 policy engine + 1 judge/teacher engine.
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-rl/run_qwen3_4b_openclaw_rl_lora.sh [extra trainer flags]   (DRY_RUN=1 prints it)
# Status: the trainer (fsdp backend) and the proxy are as verified on CPU; SGLang engines and per-component GPU
# pinning arrive with the scale-out issue (issue 7); until then the engines are the embedded engine on CUDA.
# Not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-4} ACTOR_GPUS=${ACTOR_GPUS:-2} ROLLOUT_GPUS=${ROLLOUT_GPUS:-1} PRM_GPUS=${PRM_GPUS:-1}
run_conversation_trainer qwen3-4b-openclaw-rl-lora lora \
    --conversation-method rl --rollout-function-path openclaw_rollout.generate_rollout_openclaw \
    "${GRPO_ARGS[@]}" \
    "$@"
