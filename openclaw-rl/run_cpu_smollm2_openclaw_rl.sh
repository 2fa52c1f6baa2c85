#!/usr/bin/env bash
# Binary RL from live conversations on a CPU with the embedded default, SmolLM2-135M-Instruct.
#
# Serves an OpenAI-compatible API on http://$HOST:$PORT/v1 (default 127.0.0.1:30000); every main-line
# turn is judged from the next message by the CPU judge (explicit-feedback rules, then MiniLM embeddings)
# and trains the policy in the background (async GRPO-style PPO, one sample per judged turn).
# Runs until Ctrl-C, which finishes the current step, checkpoints and stops the engine and proxy.
#
#   bash openclaw-rl/run_cpu_smollm2_openclaw_rl.sh [extra trainer flags]
#
# Env: see scripts/conversation_cpu.sh (HOST, PORT, OPENCLAW_PROXY_API_KEY, RUN_DIR, ROLLOUT_BATCH_SIZE, PRM_TYPE,
#      LR, NUM_ROLLOUT).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
exec bash "${SLIME_ROOT:-$HERE/..}/scripts/conversation_cpu.sh" "$(basename "$HERE")-cpu" \
    --conversation-method rl --extra-python-path "$HERE" \
    --rollout-function-path openclaw_rollout.generate_rollout \
    --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28 \
    "$@"
