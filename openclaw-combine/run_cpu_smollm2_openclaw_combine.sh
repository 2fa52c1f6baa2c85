#!/usr/bin/env bash
# Combine (Binary RL + OPD, the recommended method) on a CPU with SmolLM2-135M-Instruct. Each judged turn gives
# one sample: the PRM judge's +-1 as reward and, when your next message holds a correction, the frozen teacher's
# log-probs under your prompt plus that hint; advantage w_rl * reward + w_opd * (teacher - old), PPO clip
# 0.2/0.28. This is the top-level main job (scripts/run_main.sh).
#   bash openclaw-combine/run_cpu_smollm2_openclaw_combine.sh [extra trainer flags]
# Env: OPENCLAW_COMBINE_W_RL, OPENCLAW_COMBINE_W_OPD (default 1.0), HINT_JUDGE (rules), and scripts/conversation_cpu.sh's.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
exec bash "${SLIME_ROOT:-$HERE/..}/scripts/conversation_cpu.sh" "$(basename "$HERE")-cpu" \
    --conversation-method combine --hint-judge-type "${HINT_JUDGE:-rules}" --prm-enable --extra-python-path "$HERE" \
    --rollout-function-path openclaw_combine_rollout.generate_rollout \
    --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28 \
    "$@"
