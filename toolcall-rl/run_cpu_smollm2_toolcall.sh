#!/usr/bin/env bash
# Tool-call RL (ReTool) on a CPU with SmolLM2-135M-Instruct: the policy solves the maths problems of
# toolcall-rl/data/train.jsonl, calling a Python code interpreter that runs in the sandbox
# (slime.agentic.sandbox), and learns from the outcome (the last \boxed{} compared by value with the label, with
# upstream's tool-use shaping over successful calls). GRPO over N samples per problem, PPO clip 0.2/0.28, a KL
# anchor to the base model; the trainer and the embedded engine as one process each.
#   bash toolcall-rl/run_cpu_smollm2_toolcall.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), PROMPT_DATA (toolcall-rl/data/train.jsonl), TOOLS_CONFIG (toolcall-rl/tools.json),
#      RUN_DIR (runs/<this folder>-cpu), ROLLOUT_BATCH_SIZE (4 problems), N_SAMPLES (4 per problem), NUM_ROLLOUT (50),
#      MAX_TURNS (4), LR (1e-6), DYNAMIC_HISTORY=1 (one sample per step, GRPO over trajectories).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-cpu}  # a copy of this folder: its own
ROLLOUT_ARGS=(
    --prompt-data "${PROMPT_DATA:-$HERE/data/train.jsonl}" --input-key prompt --label-key label
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_retool.generate
    --custom-rm-path generate_with_retool.reward_func
    --tools-config "${TOOLS_CONFIG:-$HERE/tools.json}" --max-turns "${MAX_TURNS:-4}" --max-tool-calls 4 --tool-timeout 30
    --num-rollout "${NUM_ROLLOUT:-50}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-4}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 1
    --rollout-max-response-len 256 --rollout-max-context-len 2048 --rollout-temperature 1.0 --reward-key score
)
agentic_cpu_rl_args "${ROLLOUT_ARGS[@]}"
if [ "${DYNAMIC_HISTORY:-0}" = 1 ]; then
    ARGS+=(--dynamic-history)
fi

SUMMARY=$(cat <<'PY'
print(f"tool-call RL: {args.rollout_batch_size} problems x {args.n_samples_per_prompt} samples per rollout, "
      f"at most {args.max_turns} turns / {args.max_tool_calls} calls, tools {args.tools_config}"
      + (", dynamic history" if args.dynamic_history else ""))
PY
)
agentic_cpu_launch ", code in slime.agentic.sandbox" "$SUMMARY" "$@"
