#!/usr/bin/env bash
# SFT warm start for SWE on a CPU: the model learns the loop's workflow (find the function, read it, edit it, run the
# tests, submit) from verified demonstrations, one row per step in the loop's own layout
# (swe_demonstrations.py here: a scripted engineer on the training instances through the real service, kept when
# the sealed evaluation resolved it). With EVAL=1 the held-out instances are played through the agent loop before
# training and after the last step.
#   bash swe-rl/run_cpu_smollm2_swe_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), INSTANCES (swe-rl/data/instances.jsonl), SFT_DATA (default: the demonstrations of every
#      instance of INSTANCES, written to RUN_DIR/sft_demos.jsonl), RUN_DIR (runs/<this folder>-sft-cpu), NUM_ROLLOUT (32
#      steps of BATCH=8 rows), LR (5e-5), EVAL=1 with EVAL_DATA (training rows, default RUN_DIR/train.jsonl: every
#      instance), MAX_STEPS (8 steps per evaluated episode), EVAL_TEMPERATURE (0).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-sft-cpu}  # a copy of this folder: its own
NUM_ROLLOUT=${NUM_ROLLOUT:-32}
INSTANCES=${INSTANCES:-$HERE/data/instances.jsonl}
ROWS="$RUN_DIR/train.jsonl"
if [ -z "${SFT_DATA:-}" ] || { [ "${EVAL:-0}" = 1 ] && [ -z "${EVAL_DATA:-}" ]; }; then
    mkdir -p "$RUN_DIR"
    python -m slime.agentic.swe.instances --instances "$INSTANCES" --out "$ROWS" >&2
fi
if [ -z "${SFT_DATA:-}" ]; then  # the demonstrations of every instance (about 80 s for the shipped 47)
    SFT_DATA="$RUN_DIR/sft_demos.jsonl"
    if [ ! -s "$SFT_DATA" ]; then  # also on --dry-run: the trainer's parser checks the data file
        python "$HERE/swe_demonstrations.py" --data "$ROWS" --instances "$INSTANCES" --out "$SFT_DATA" >&2
    fi
fi
EVAL_DATA=${EVAL_DATA:-$ROWS}
agentic_cpu_sft_args 3 --prompt-data "$SFT_DATA" --input-key prompt --metadata-key metadata
EVAL_ARGS=(
    --eval-input-key text
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_swe_remote.generate
    --custom-rm-path generate_with_swe_remote.reward_func --dynamic-history
    --swe-instances "$INSTANCES" --env-workers 1 --env-provider swe --max-turns "${MAX_STEPS:-8}"
)
agentic_cpu_sft_eval 384 8192 "${EVAL_ARGS[@]}"
agentic_cpu_sft_launch "demonstration steps" "$@"
