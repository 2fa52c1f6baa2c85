#!/usr/bin/env bash
# Combine with the top-K teacher term on a CPU with SmolLM2-135M-Instruct: the PRM judge's +-1 through the PPO
# policy loss, plus the top-K (DISTILL_TOPK, default 50) reverse KL to the frozen teacher under your prompt plus
# the hint whenever your next message holds a correction. The top-K term also teaches what the policy never
# samples (e.g. "start with a greeting"), which token-level OPD cannot.
#   bash openclaw-combine/run_cpu_smollm2_openclaw_combine_topk.sh [extra trainer flags]
# Env: OPENCLAW_COMBINE_W_RL, OPENCLAW_COMBINE_W_OPD (default 1.0), DISTILL_TOPK, HINT_JUDGE (rules), and
# scripts/conversation_cpu.sh's.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
exec bash "${SLIME_ROOT:-$HERE/..}/scripts/conversation_cpu.sh" "$(basename "$HERE")-topk-cpu" \
    --conversation-method combine_topk --hint-judge-type "${HINT_JUDGE:-rules}" --prm-enable --extra-python-path "$HERE" \
    --rollout-function-path openclaw_combine_rollout.generate_rollout \
    --distill-topk "${DISTILL_TOPK:-50}" \
    --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28 \
    "$@"
