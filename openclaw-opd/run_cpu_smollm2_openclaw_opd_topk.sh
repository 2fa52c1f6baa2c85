#!/usr/bin/env bash
# Top-K distillation from hindsight hints on a CPU with SmolLM2-135M-Instruct: the frozen teacher's top-K
# (DISTILL_TOPK, default 50) log-probs per response token under the hinted prompt; the loss is the reverse KL
# over those K tokens plus a tail bin (no PPO ratio), lr 1e-6 as upstream.
# The top-K loss has no reference-KL term, so the shared KL anchor is off here (no reference pass).
#   bash openclaw-opd/run_cpu_smollm2_openclaw_opd_topk.sh [extra trainer flags]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LR=${LR:-1e-6} KL_LOSS_COEF=0 exec bash "${SLIME_ROOT:-$HERE/..}/scripts/conversation_cpu.sh" "$(basename "$HERE")-topk-cpu" \
    --conversation-method opd_topk --hint-judge-type "${HINT_JUDGE:-rules}" --prm-enable --extra-python-path "$HERE" \
    --rollout-function-path openclaw_opd_rollout.generate_rollout \
    --distill-topk "${DISTILL_TOPK:-50}" --entropy-coef 0.0 \
    "$@"
