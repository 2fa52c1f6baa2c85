# Sourced (no arguments) by the agentic settings' GPU launch scripts (terminal-rl/run_qwen3_8b_terminal.sh,
# toolcall-rl/run_qwen3_4b_retool.sh, swe-rl/run_qwen3_8b_swe.sh) from the repository root: activates .venv when no
# environment is active and takes --dry-run out of the caller's arguments wherever it lands (DRY_RUN=1; also from
# the environment) and defines AGENTIC_PPO_ARGS, upstream's PPO recipe. Then the caller, with its own flags
# in between:
#   agentic_gpu_layout [VAR ..]  the layout variables (scripts/README.md, "GPU layout") where unset: 1 node of 8 GPUs,
#       4 trainer ranks (TRAIN_TP 4) + 4 engine GPUs (ROLLOUT_TP 2), SGLang; exports the multi-node ones and checks
#       that each (and each VAR, the caller's own) is an integer; ranges and the combination are checked by
#       slime.launch, with the variable names in its messages
#   agentic_gpu_command ROTARY_BASE SAVE SAVE_INTERVAL [FLAG ..]  TRAINER_ARGS: the model (HF_CKPT, also the KL
#       reference), the checkpoints, the layout, the FLAGs (the setting's), dynamic batches of MAX_TOKENS_PER_GPU
#       (16384) tokens, gradient checkpointing, TRAIN_BACKEND (fsdp) on cuda
#   agentic_gpu_launch SUMMARY "$@"  one line on the setting: the Python SUMMARY with `args` parsed from
#       TRAINER_ARGS and the extra flags (flags that do not parse: no line, the launcher reports them); then execs
#       `python -m slime.launch [--dry-run] slime/train_async.py`, which prints the layout and the command (and,
#       without --dry-run, execs torchrun)
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
# shellcheck source=scripts/dry_run_flag.sh
source "$(dirname "${BASH_SOURCE[0]}")/dry_run_flag.sh"

# upstream's PPO recipe of every agentic GPU script (the advantage estimator is the caller's): KL k3 0.01 to the
# reference, clip 0.2 / 0.28, Adam at 1e-6 constant
AGENTIC_PPO_ARGS=(
    --use-kl-loss --kl-loss-coef 0.01 --kl-loss-type k3 --entropy-coef 0.0 --eps-clip 0.2 --eps-clip-high 0.28
    --optimizer adam --lr 1e-6 --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
)

agentic_gpu_layout() {
    NUM_GPUS=${NUM_GPUS:-8} NNODES=${NNODES:-1} NODE_RANK=${NODE_RANK:-0} MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
    MASTER_PORT=${MASTER_PORT:-29500} ROLLOUT_ENGINE=${ROLLOUT_ENGINE:-sglang}
    ACTOR_GPUS=${ACTOR_GPUS:-4} TRAIN_TP=${TRAIN_TP:-4} ROLLOUT_GPUS=${ROLLOUT_GPUS:-4} ROLLOUT_TP=${ROLLOUT_TP:-2}
    export NNODES NODE_RANK MASTER_ADDR MASTER_PORT
    local var
    for var in NUM_GPUS NNODES NODE_RANK ACTOR_GPUS ROLLOUT_GPUS ROLLOUT_TP "$@" TRAIN_TP MASTER_PORT; do
        if ! [[ "${!var}" =~ ^[0-9]+$ ]]; then
            echo "error: $var must be a non-negative integer, got '${!var}'" >&2; exit 2
        fi
    done
}

agentic_gpu_command() {
    local rotary_base=$1 save=$2 save_interval=$3
    shift 3
    TRAINER_ARGS=(
        --hf-checkpoint "$HF_CKPT" --ref-load "$HF_CKPT" --rotary-base "$rotary_base"
        --save "$save" --save-interval "$save_interval"
        --actor-num-nodes "$NNODES" --actor-num-gpus-per-node "$ACTOR_GPUS" --num-gpus-per-node "$NUM_GPUS"
        --tensor-model-parallel-size "$TRAIN_TP"
        --rollout-engine "$ROLLOUT_ENGINE" --rollout-num-gpus "$ROLLOUT_GPUS" --rollout-num-gpus-per-engine "$ROLLOUT_TP"
        "$@"
        --use-dynamic-batch-size --max-tokens-per-gpu "${MAX_TOKENS_PER_GPU:-16384}" --gradient-checkpointing
        --device cuda --train-backend "${TRAIN_BACKEND:-fsdp}"
    )
}

agentic_gpu_launch() {
    local summary=$1
    shift
    python - "${TRAINER_ARGS[@]}" "$@" <<<"import contextlib, io, sys
from slime.utils.arguments import parse_trainer_args
try:
    with contextlib.redirect_stderr(io.StringIO()):  # the flags the run's plugins declare included
        args = parse_trainer_args(sys.argv[1:])
except SystemExit:
    sys.exit(0)
$summary"
    local launcher=(python -m slime.launch)
    if [ "$DRY_RUN" = 1 ]; then
        launcher+=(--dry-run)
    fi
    exec "${launcher[@]}" slime/train_async.py "${TRAINER_ARGS[@]}" "$@"
}
