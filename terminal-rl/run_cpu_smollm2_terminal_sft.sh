#!/usr/bin/env bash
# The SFT warm start of terminal RL on a CPU: SmolLM2-135M-Instruct writes no tool call at all as shipped
# (terminal-rl/README.md), so it first learns from verified demonstrations (terminal-rl/data/sft_demos.jsonl, written by
# `python -m slime.agentic.terminal.demonstrations`: each training task solved through the real service and shell
# tools, kept only when its tests pass, one row per model turn in the loop's own layout) through the same trainer with
# --loss-type sft_loss (slime.rollout.sft_rollout). With EVAL=1 it evaluates the held-out tasks through the real turn
# loop before training and after the last step (eval/heldout/* in the metrics).
# The weights it ends with: <RUN_DIR>/ckpt/iter_<steps>/model (an HF folder: HF_CKPT of run_cpu_smollm2_terminal.sh).
#   bash terminal-rl/run_cpu_smollm2_terminal_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), SFT_DATA (terminal-rl/data/sft_demos.jsonl), RUN_DIR (runs/terminal-sft-cpu), BATCH (8 rows
#      per step), NUM_ROLLOUT (32 steps, about three passes over the 84 rows), LR (5e-5), EVAL=1 with EVAL_DATA
#      (terminal-rl/data/heldout.jsonl) and TASKS_DIR (terminal-rl/tasks).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/cpu_launch_env.sh
source scripts/cpu_launch_env.sh
RUN_DIR=${RUN_DIR:-runs/terminal-sft-cpu}
NUM_ROLLOUT=${NUM_ROLLOUT:-32}
ARGS=(
    --hf-checkpoint "${HF_CKPT:-smollm2}"
    --prompt-data "${SFT_DATA:-$HERE/data/sft_demos.jsonl}" --input-key prompt --metadata-key metadata
    --loss-type sft_loss --rollout-function-path slime.rollout.sft_rollout.generate_rollout
    --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "${BATCH:-8}" --n-samples-per-prompt 1
    --global-batch-size "${BATCH:-8}" --rollout-shuffle
    --lr "${LR:-5e-5}" --lr-decay-style cosine --lr-warmup-iters 3 --weight-decay 0.0 --adam-beta1 0.9 --adam-beta2 0.98
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval "$NUM_ROLLOUT" --update-weights-interval "$NUM_ROLLOUT"
)
if [ "${EVAL:-0}" = 1 ]; then
    # evaluation goes through the terminal turn loop itself: the same generate function, service and reward as RL
    ARGS+=(--eval-interval "$NUM_ROLLOUT" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
           --eval-input-key task
           --custom-generate-function-path slime.agentic.terminal.agent.generate
           --custom-rm-path slime.agentic.terminal.agent.reward_func --dynamic-history
           --terminal-tasks-dir "${TASKS_DIR:-$HERE/tasks}" --env-workers 1 --env-provider terminal --max-turns 6
           --eval-temperature "${EVAL_TEMPERATURE:-0}" --eval-max-response-len 256 --rollout-max-context-len 4096
           --eval-reward-key acc)
fi
if [ "$DRY_RUN" = 1 ]; then
    python - "${ARGS[@]}" "$@" <<'PY'
import shlex, sys
from slime.utils.arguments import parse_args
args = parse_args(sys.argv[1:], mode="sync", world_size=1)
print("layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process (evaluation only)")
print(f"SFT warm start: {args.num_rollout} steps of {args.global_batch_size} demonstration turns from {args.prompt_data}, "
      f"lr {args.lr} ({args.lr_decay_style})" + (", evaluated on " + ", ".join(args.eval_datasets) if args.eval_datasets else ""))
print("python slime/train.py " + shlex.join(sys.argv[1:]))
PY
    exit 0
fi
exec python slime/train.py "${ARGS[@]}" "$@"
