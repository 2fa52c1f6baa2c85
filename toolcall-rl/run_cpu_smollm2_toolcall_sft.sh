#!/usr/bin/env bash
# The SFT warm start of tool-call RL on a CPU (upstream trains its ReTool policy from an SFT checkpoint too):
# SmolLM2-135M-Instruct learns from verified tool-use traces (toolcall-rl/data/sft_traces.jsonl, written by
# slime.agentic.toolcall_traces: half call the code interpreter and answer with what it printed, half answer
# directly) through the same trainer with --loss-type sft_loss (slime.rollout.sft_rollout: the traces in the loop's
# own token layout, observations not trained). With EVAL=1 it evaluates the held-out problems through the real
# tool-call loop before training and after the last step (<run dir>/eval/, eval/heldout/* in the metrics).
# The weights it ends with: <RUN_DIR>/ckpt/iter_<steps>/model (an HF folder: HF_CKPT of the RL script).
#   bash toolcall-rl/run_cpu_smollm2_toolcall_sft.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), SFT_DATA (toolcall-rl/data/sft_traces.jsonl), RUN_DIR (runs/toolcall-sft-cpu),
#      BATCH (8 traces per step), NUM_ROLLOUT (75 steps = one pass over the 600 traces), LR (5e-5),
#      EVAL=1 with EVAL_DATA (toolcall-rl/data/heldout.jsonl).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/cpu_launch_env.sh
source scripts/cpu_launch_env.sh
RUN_DIR=${RUN_DIR:-runs/toolcall-sft-cpu}
NUM_ROLLOUT=${NUM_ROLLOUT:-75}
ARGS=(
    --hf-checkpoint "${HF_CKPT:-smollm2}"
    --prompt-data "${SFT_DATA:-$HERE/data/sft_traces.jsonl}" --input-key prompt --label-key label --metadata-key metadata
    --loss-type sft_loss --rollout-function-path slime.rollout.sft_rollout.generate_rollout
    --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "${BATCH:-8}" --n-samples-per-prompt 1
    --global-batch-size "${BATCH:-8}" --rollout-shuffle
    --lr "${LR:-5e-5}" --lr-decay-style cosine --lr-warmup-iters 5 --weight-decay 0.0 --adam-beta1 0.9 --adam-beta2 0.98
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval "$NUM_ROLLOUT" --update-weights-interval "$NUM_ROLLOUT"
)
if [ "${EVAL:-0}" = 1 ]; then
    # evaluation goes through the tool-call loop itself: the same generate function and reward as RL
    ARGS+=(--eval-interval "$NUM_ROLLOUT" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
           --custom-generate-function-path slime.agentic.toolcall.generate --custom-rm-path slime.agentic.toolcall.reward_func
           --tools-config "${TOOLS_CONFIG:-$HERE/tools.json}" --max-turns 4 --max-tool-calls 4 --tool-timeout 30
           --eval-temperature "${EVAL_TEMPERATURE:-0}" --eval-max-response-len 256 --rollout-max-context-len 2048
           --eval-reward-key acc)
fi
if [ "$DRY_RUN" = 1 ]; then
    python - "${ARGS[@]}" "$@" <<'PY'
import shlex, sys
from slime.utils.arguments import parse_args
args = parse_args(sys.argv[1:], mode="sync", world_size=1)
print("layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process (evaluation only)")
print(f"SFT warm start: {args.num_rollout} steps of {args.global_batch_size} traces from {args.prompt_data}, "
      f"lr {args.lr} ({args.lr_decay_style})" + (", evaluated on " + ", ".join(args.eval_datasets) if args.eval_datasets else ""))
print("python slime/train.py " + shlex.join(sys.argv[1:]))
PY
    exit 0
fi
exec python slime/train.py "${ARGS[@]}" "$@"
