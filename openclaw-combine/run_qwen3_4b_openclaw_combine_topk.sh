#!/usr/bin/env bash
# Combine with the top-K teacher term (PPO on the judge's +-1 plus top-K reverse KL, K=DISTILL_TOPK) on Qwen3-4B, full fine-tuning.
# Hardware: one node with 8 GPUs (80 GB class): 4 trainer ranks + 1 policy engine (TP2) + 1 judge/teacher engine (TP2).
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-combine/run_qwen3_4b_openclaw_combine_topk.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the resolved GPU layout and the full command and starts nothing. Layout and
# multi-node variables (NUM_GPUS, ACTOR_GPUS, ROLLOUT_GPUS, PRM_GPUS, ROLLOUT_TP, PRM_TP, TRAIN_TP, NNODES,
# NODE_RANK, MASTER_ADDR, MASTER_PORT): scripts/README.md, "GPU layout".
# Status: engines are SGLang servers (--rollout-engine sglang), each pinned to its own GPUs; the trainer
# is the fsdp backend. The layout, the command and its flags are verified on CPU (tests/unit/test_launch_scripts.py);
# not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-8} ACTOR_GPUS=${ACTOR_GPUS:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-2} PRM_GPUS=${PRM_GPUS:-2} DEFAULT_ENGINE_TP=2
run_conversation_trainer full combine_topk --rollout-function-path openclaw_combine_rollout.generate_rollout \
    --distill-topk "${DISTILL_TOPK:-50}" "$@"
