#!/usr/bin/env bash
# Shared body of the CPU launch scripts of the conversation methods (openclaw-rl, -opd, -combine): the trainer
# on SmolLM2-135M-Instruct with the conversation proxy in front of the embedded engine. Not run by itself:
#   bash scripts/conversation_cpu.sh <run name> <method flags...> [extra trainer flags]
# --dry-run among a method script's arguments (or DRY_RUN=1) validates the flags and prints the layout and command.
# Env: HOST, PORT, OPENCLAW_PROXY_API_KEY (required if HOST is not loopback), SERVED_MODEL_NAME, RUN_DIR
#      (default runs/<run name>), ROLLOUT_BATCH_SIZE (8), PRM_TYPE (rules+embedding), LR (1e-5),
#      KL_LOSS_COEF (0.05: KL to the base model; 0 turns it off), NUM_ROLLOUT.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
NAME=$1
shift
# the method scripts append their own arguments: --dry-run is taken out wherever it lands
# shellcheck source=scripts/cpu_launch_env.sh
source scripts/cpu_launch_env.sh
export HOST=${HOST:-127.0.0.1} PORT=${PORT:-30000}
RUN_DIR=${RUN_DIR:-runs/$NAME}

COMMON_ARGS=(
    --hf-checkpoint smollm2
    --disable-rollout-global-dataset
    --data-source-path slime.conversation.rollout.ConversationDataSource
    --num-rollout "${NUM_ROLLOUT:-100000000}"
    --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-8}" --n-samples-per-prompt 1 --num-steps-per-rollout 1
    --rollout-max-response-len 512 --rollout-temperature 0.6 --reward-key score
    --lr "${LR:-1e-5}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
    # A KL anchor to the frozen base model (upstream uses 0): with openclaw-test's simulated users on SmolLM2-135M
    # it kept task quality where KL 0 let it erode on some personas, not on all (openclaw-test/README.md, "Results").
    --use-kl-loss --kl-loss-coef "${KL_LOSS_COEF:-0.05}" --kl-loss-type low_var_kl
    --prm-type "${PRM_TYPE:-rules+embedding}" --prm-m "${PRM_M:-3}" --prm-temperature 0.6 --prm-max-new-tokens 512
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10
)
if [ "$DRY_RUN" = 1 ]; then
    # validate the flags with the trainer's own parser, print the CPU layout and the command, start nothing
    python - "${COMMON_ARGS[@]}" "$@" <<'PY'
import shlex, sys
from slime.utils.arguments import method_summary, parse_args
args = parse_args(sys.argv[1:], mode="async", world_size=1)
print("layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process, "
      f"the conversation proxy on {args.proxy_host}:{args.proxy_port}; OMP_NUM_THREADS=1 per process")
print(method_summary(args))
print("python slime/train_async.py " + shlex.join(sys.argv[1:]))
PY
    exit 0
fi
# One trainer process: started directly (a group of one), so Ctrl-C reaches the trainer's clean-stop handler.
exec python slime/train_async.py "${COMMON_ARGS[@]}" "$@"
