#!/usr/bin/env bash
# Top-K distillation (K=DISTILL_TOPK, default 50; reverse KL over the teacher's top K + tail, lr 1e-6) on Qwen3-4B, LoRA rank 16.
# Hardware: one node with 4 GPUs (24 GB or more each): 2 trainer ranks + 1 policy engine + 1 judge/teacher engine.
#   HF_CKPT=/models/Qwen3-4B OPENCLAW_PROXY_API_KEY=... bash openclaw-opd/run_qwen3_4b_openclaw_opd_topk_lora.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the resolved GPU layout and the full command and starts nothing. Layout and
# multi-node variables (NUM_GPUS, ACTOR_GPUS, ROLLOUT_GPUS, PRM_GPUS, ROLLOUT_TP, PRM_TP, TRAIN_TP, NNODES,
# NODE_RANK, MASTER_ADDR, MASTER_PORT): scripts/README.md, "GPU layout".
# Status: engines are SGLang servers (--rollout-engine sglang), each pinned to its own GPUs; the trainer
# is the fsdp backend. The layout, the command and its flags are verified on CPU (tests/unit/test_launch_scripts.py);
# not yet run on a GPU machine.
# shellcheck source=scripts/conversation_gpu_common.sh
source "$(dirname "$0")/../scripts/conversation_gpu_common.sh"
NUM_GPUS=${NUM_GPUS:-4} ACTOR_GPUS=${ACTOR_GPUS:-2} ROLLOUT_GPUS=${ROLLOUT_GPUS:-1} PRM_GPUS=${PRM_GPUS:-1} DEFAULT_ENGINE_TP=1
run_conversation_trainer lora opd_topk --rollout-function-path openclaw_opd_rollout.generate_rollout \
    --lr 1e-6 --distill-topk "${DISTILL_TOPK:-50}" "$@"
