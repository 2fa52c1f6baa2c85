#!/usr/bin/env bash
# On-policy distillation from hindsight hints on a CPU with SmolLM2-135M-Instruct (token-level OPD).
# A correction in your next message ("shorter please", "don't use X", "no, I meant ...") becomes a hint; a frozen
# copy of the model scores the reply it gave under your prompt plus the hint, and the policy is pulled toward
# those teacher log-probs (advantage teacher - old on every token, PPO clip 0.2). Turns without a hint do not train.
#   bash openclaw-opd/run_cpu_smollm2_openclaw_opd.sh [extra trainer flags]     (env: see scripts/conversation_cpu.sh)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
exec bash "${SLIME_ROOT:-$HERE/..}/scripts/conversation_cpu.sh" "$(basename "$HERE")-cpu" \
    --conversation-method opd --hint-judge-type "${HINT_JUDGE:-rules}" --prm-enable --extra-python-path "$HERE" \
    --rollout-function-path openclaw_opd_rollout.generate_rollout \
    --entropy-coef 0.0 --eps-clip 0.2 \
    "$@"
