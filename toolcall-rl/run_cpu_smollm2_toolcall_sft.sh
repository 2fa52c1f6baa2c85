#!/usr/bin/env bash
# The SFT warm start of tool-call RL on a CPU (upstream trains its ReTool policy from an SFT checkpoint too):
# SmolLM2-135M-Instruct learns from verified tool-use traces (toolcall-rl/data/sft_traces.jsonl, written by
# toolcall_traces.py (this folder): half call the code interpreter and answer with what it printed, half answer
# directly) through the same trainer with --loss-type sft_loss (slime.rollout.sft_rollout: the traces in the loop's
# own token layout, observations not trained). With EVAL=1 it evaluates the held-out problems through the real
# tool-call loop before training and after the last step (<run dir>/eval/, eval/heldout/* in the metrics).
# The weights it ends with: <RUN_DIR>/ckpt/iter_<steps>/model (an HF folder: HF_CKPT of the RL script).
#   bash toolcall-rl/run_cpu_smollm2_toolcall_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), SFT_DATA (toolcall-rl/data/sft_traces.jsonl), RUN_DIR (runs/<this folder>-sft-cpu),
#      BATCH (8 traces per step), NUM_ROLLOUT (75 steps = one pass over the 600 traces), LR (5e-5),
#      EVAL=1 with EVAL_DATA (toolcall-rl/data/heldout.jsonl).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-sft-cpu}  # a copy of this folder: its own
NUM_ROLLOUT=${NUM_ROLLOUT:-75}
agentic_cpu_sft_args 5 \
    --prompt-data "${SFT_DATA:-$HERE/data/sft_traces.jsonl}" --input-key prompt --label-key label --metadata-key metadata
# EVAL=1: evaluation goes through the tool-call loop itself: the same generate function and reward as RL
EVAL_ARGS=(
    --extra-python-path "$HERE"  # this folder's modules: the loop and its reward
    --custom-generate-function-path generate_with_retool.generate --custom-rm-path generate_with_retool.reward_func
    --tools-config "${TOOLS_CONFIG:-$HERE/tools.json}" --max-turns 4 --max-tool-calls 4 --tool-timeout 30
)
agentic_cpu_sft_eval 256 2048 "${EVAL_ARGS[@]}"
agentic_cpu_sft_launch traces "$@"
