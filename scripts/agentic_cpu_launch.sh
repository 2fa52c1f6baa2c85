# Sourced (no arguments) by the agentic settings' CPU launch scripts from the repository root: the RL ones
# (terminal-rl/run_cpu_smollm2_terminal.sh, swe-rl/run_cpu_smollm2_swe.sh, gui-rl/run_cpu_smollm2_gui_text.sh,
# gui-rl/run_cpu_tiny_vlm_gui.sh, toolcall-rl/run_cpu_smollm2_toolcall.sh) and the SFT warm starts (terminal-rl/run_cpu_smollm2_terminal_sft.sh,
# gui-rl/run_cpu_smollm2_gui_text_sft.sh, toolcall-rl/run_cpu_smollm2_toolcall_sft.sh). It first sources
# scripts/cpu_launch_env.sh (--dry-run out of the caller's arguments wherever it lands: DRY_RUN=1, also from the
# environment; .venv when no environment is active; one intra-op thread per process; offline Hugging Face stack).
# The caller sets RUN_DIR (and, for SFT, NUM_ROLLOUT; HERE, its own folder) and builds ARGS, the trainer flags, with
# its own flags in between:
#   agentic_cpu_rl_args [FLAG ..]  ARGS: the model (HF_CKPT, smollm2), the FLAGs (the setting's), then the RL
#       recipe: GRPO, PPO clip 0.2 / 0.28, a KL anchor (low_var_kl 0.01) to the base model, Adam at LR (1e-6)
#       constant, the run folder RUN_DIR with a checkpoint every 10 rollouts in RUN_DIR/ckpt
#   agentic_cpu_env_args [FLAG ..]  appends the environment service's flags: ENV_SERVER_URL (attach to a running
#       service instead of starting pool servers), the FLAGs (the setting's), STEP_JUDGE (a per-step PRM, `rules` or
#       module:factory: the outcome plus its score, step_wise advantages normalised per (task, step))
#   agentic_cpu_sft_args WARMUP [FLAG ..]  ARGS of an SFT warm start: the model (HF_CKPT, smollm2), the FLAGs (the
#       data and its keys), sft_loss through slime.rollout.sft_rollout, NUM_ROLLOUT steps of BATCH (8) shuffled rows,
#       Adam at LR (5e-5) with WARMUP warm-up steps and cosine decay, RUN_DIR with one checkpoint (and weight update)
#       after the last step; the loss averaged over the batch's trained tokens (SFT_LOSS_AVERAGE=token, as upstream's
#       SFT scripts; `sample`: each trace's mean, then over traces: measured worse, toolcall-rl/README.md)
#   agentic_cpu_sft_eval RESPONSE_LEN CONTEXT_LEN [FLAG ..]  with EVAL=1, appends the held-out evaluation before
#       training and after the last step: EVAL_DATA (HERE/data/heldout.jsonl) as `heldout`, the FLAGs (the setting's
#       loop), EVAL_TEMPERATURE (0), RESPONSE_LEN tokens per response and CONTEXT_LEN per episode, reward key acc;
#       EVAL=loop: all of that but no evaluation (the loop's flags accepted: a warm start continued from its
#       checkpoint whose evaluation runs elsewhere, bench/learning_protocol.py)
#   agentic_cpu_launch LAYOUT SUMMARY "$@"  RL: with --dry-run (DRY_RUN=1) validates ARGS and the extra flags with
#       the trainer's parser (mode async; an invalid flag ends the script with its error) and prints the CPU layout
#       (the trainer process and the embedded engine, then LAYOUT: what else runs, e.g. ", the environment service
#       as child processes"), the Python SUMMARY and the command, then exits 0; otherwise execs
#       `python slime/train_async.py` with ARGS and the extra flags (`torchrun` with TRAINER_PROCS ranks on a free
#       loopback port when the caller sets TRAINER_PROCS above 1). SUMMARY, the setting's line, has `args` parsed
#       and environments(WHERE): "environments: " ENV_SERVER_URL or the pool servers the trainer starts (provider,
#       WHERE), and the step judge with the advantage estimator when there is one
#   agentic_cpu_sft_launch UNIT "$@"  SFT: the same with mode sync and `python slime/train.py`; the summary says
#       NUM_ROLLOUT steps of the batch size in UNIT (what a row is) from the data, the learning rate and the
#       evaluation sets
# The trainer (or torchrun) is exec'd directly (a group of one), so Ctrl-C reaches the trainer's clean-stop handler.
# shellcheck source=scripts/cpu_launch_env.sh
source "$(dirname "${BASH_SOURCE[0]}")/cpu_launch_env.sh"

agentic_cpu_rl_args() {
    ARGS=(
        --hf-checkpoint "${HF_CKPT:-smollm2}"
        "$@"
        --advantage-estimator grpo --eps-clip 0.2 --eps-clip-high 0.28
        --use-kl-loss --kl-loss-coef 0.01 --kl-loss-type low_var_kl
        --lr "${LR:-1e-6}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
        --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10
    )
}

agentic_cpu_env_args() {
    if [ -n "${ENV_SERVER_URL:-}" ]; then
        ARGS+=(--env-server-url "$ENV_SERVER_URL")
    fi
    ARGS+=("$@")
    if [ -n "${STEP_JUDGE:-}" ]; then  # a per-step PRM: the outcome plus its score
        ARGS+=(--step-judge "$STEP_JUDGE" --advantage-estimator step_wise --prm-step-coef 1.0)
    fi
}

agentic_cpu_sft_args() {
    local warmup=$1 average
    shift
    case "${SFT_LOSS_AVERAGE:-token}" in
        token) average=(--calculate-per-token-loss) ;;
        sample) average=() ;;
        *) echo "error: SFT_LOSS_AVERAGE must be token or sample, got '${SFT_LOSS_AVERAGE}'" >&2; exit 2 ;;
    esac
    ARGS=(
        --hf-checkpoint "${HF_CKPT:-smollm2}"
        "$@"
        --loss-type sft_loss --rollout-function-path slime.rollout.sft_rollout.generate_rollout "${average[@]}"
        --num-rollout "$NUM_ROLLOUT" --rollout-batch-size "${BATCH:-8}" --n-samples-per-prompt 1
        --global-batch-size "${BATCH:-8}" --rollout-shuffle
        --lr "${LR:-5e-5}" --lr-decay-style cosine --lr-warmup-iters "$warmup" --weight-decay 0.0
        --adam-beta1 0.9 --adam-beta2 0.98
        --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval "$NUM_ROLLOUT"
        --update-weights-interval "$NUM_ROLLOUT"
    )
}

agentic_cpu_sft_eval() {
    local response_len=$1 context_len=$2
    shift 2
    case "${EVAL:-0}" in
        1) ARGS+=(--eval-interval "$NUM_ROLLOUT") ;;
        loop) ;;
        *) return 0 ;;
    esac
    ARGS+=(--eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
           "$@"
           --eval-temperature "${EVAL_TEMPERATURE:-0}" --eval-max-response-len "$response_len"
           --rollout-max-context-len "$context_len" --eval-reward-key acc)
}

# _agentic_cpu_run MODE ENTRY LAYOUT SUMMARY "$@": the dry run (the layout line, the summary, the command) or exec;
# TRAINER_PROCS > 1 (a caller's choice, default 1) runs the trainer as that many torchrun ranks on a free loopback port
_agentic_cpu_run() {
    local mode=$1 entry=$2 layout=$3 summary=$4 procs=${TRAINER_PROCS:-1} launcher
    shift 4
    if ! [[ "$procs" =~ ^[1-9][0-9]*$ ]]; then
        echo "error: TRAINER_PROCS must be a positive integer, got '$procs'" >&2; exit 2
    fi
    launcher="python $entry"
    if [ "$procs" -gt 1 ]; then
        launcher="torchrun --nproc_per_node=$procs --master_port PORT $entry"
    fi
    if [ "$DRY_RUN" = 1 ]; then
        # the layout line travels as the first argument: the flags are sys.argv[2:]
        python - "$layout" "${ARGS[@]}" "$@" <<<"import shlex, sys
from slime.utils.arguments import parse_args
args = parse_args(sys.argv[2:], mode='$mode', world_size=$procs)
print(sys.argv[1])
$summary
print('$launcher ' + shlex.join(sys.argv[2:]))"
        exit 0
    fi
    if [ "$procs" -gt 1 ]; then
        exec torchrun --nproc_per_node="$procs" --master_port "$(python -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" "$entry" "${ARGS[@]}" "$@"
    fi
    exec python "$entry" "${ARGS[@]}" "$@"
}

if [ "${TRAINER_PROCS:-1}" = 1 ]; then
    _AGENTIC_CPU_LAYOUT="layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process"
else
    _AGENTIC_CPU_LAYOUT="layout: CPU, ${TRAINER_PROCS} trainer processes (torchrun ranks; rank 0 runs the rollout), the embedded engine as rank 0's child process"
fi

agentic_cpu_launch() {
    local layout=$1 summary
    summary="def environments(where):
    pool = f'{args.env_workers} pool server(s) started by the trainer ({args.env_provider}, {where})'
    judge = f'; step judge {args.step_judge}, advantages {args.advantage_estimator}' if args.step_judge else ''
    return f'environments: {args.env_server_url or pool}{judge}'
$2"
    shift 2
    _agentic_cpu_run async slime/train_async.py "$_AGENTIC_CPU_LAYOUT$layout; OMP_NUM_THREADS=1 per process" \
        "$summary" "$@"
}

agentic_cpu_sft_launch() {
    local summary
    summary="print(f'SFT warm start: {args.num_rollout} steps of {args.global_batch_size} $1 from {args.prompt_data}, '
      f'lr {args.lr} ({args.lr_decay_style})'
      + (', evaluated on ' + ', '.join(args.eval_datasets) if args.eval_datasets else ''))"
    shift
    _agentic_cpu_run sync slime/train.py "$_AGENTIC_CPU_LAYOUT (evaluation only)" "$summary" "$@"
}
