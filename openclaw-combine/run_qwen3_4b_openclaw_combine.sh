#!/usr/bin/env bash
# Combine (Binary RL + OPD) on Qwen3-4B, full fine-tuning. Default layout: 8 GPUs = 4 trainer + 2 policy engine + 2 judge/teacher engine.
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-combine/run_qwen3_4b_openclaw_combine.sh [extra trainer flags]   (DRY_RUN=1 prints it)
# Status: the trainer (fsdp backend) and the proxy are as verified on CPU; SGLang engines and per-component GPU
# pinning arrive with the scale-out issue (issue 7); until then the engines are the embedded engine on CUDA.
# Not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-8} ACTOR_GPUS=${ACTOR_GPUS:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-2} PRM_GPUS=${PRM_GPUS:-2}
run_conversation_trainer qwen3-4b-openclaw-combine full \
    --conversation-method combine --hint-judge-type "${HINT_JUDGE:-llm}" \
    --rollout-function-path openclaw_combine_rollout.generate_rollout_openclaw_combine \
    "${GRPO_ARGS[@]}" --loss-type custom_loss --custom-loss-function-path combine_loss.combine_loss_function \
    "$@"
