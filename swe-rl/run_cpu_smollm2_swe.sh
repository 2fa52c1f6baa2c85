#!/usr/bin/env bash
# SWE RL on a CPU with SmolLM2-135M-Instruct: the policy fixes real bugs of the shipped instances
# (swe-rl/data/instances.jsonl: SWE-bench format, six pinned PyPI projects) through mini-swe-agent's loop (THOUGHT +
# one bash block per step, in the instance's repository in a bubblewrap sandbox served by the environment service's
# `swe` provider) and learns from the sealed evaluation (+1 resolved, -1 otherwise). One sample per step
# (--dynamic-history), GRPO over the episode's outcome, PPO clip 0.2/0.28, a KL anchor; the trainer and the embedded
# engine as one process each, the pool servers as their own processes. A 135M model is not expected to fix real bugs:
# this runs the whole machinery on a CPU.
#   bash swe-rl/run_cpu_smollm2_swe.sh [--dry-run] [extra trainer flags]
# Env: HF_CKPT (smollm2), INSTANCES (swe-rl/data/instances.jsonl), PROMPT_DATA (default: the training rows of every
#      instance, written to RUN_DIR/train.jsonl), ENV_SERVER_URL (attach to a running service instead of starting
#      ENV_WORKERS pool servers, default 1), RUN_DIR (runs/<this folder>-cpu), ROLLOUT_BATCH_SIZE (2 instances),
#      N_SAMPLES (4 per instance), NUM_ROLLOUT (20), MAX_STEPS (8 steps per episode), LR (1e-6), STEP_JUDGE (rules: the
#      CPU rule judge scores every step and advantages are step_wise; module:factory for your own; default none),
#      SWE_BACKEND (bwrap, or docker: --swe-backend), SWE_IMAGE (with docker: swebench, swe-gym or an image template:
#      --swe-image), SAMPLE_UNIT (step: one sample per step, --dynamic-history; trajectory: one sample per episode, the
#      observations masked out: a third of the tokens to train on a CPU).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/agentic_cpu_launch.sh
source scripts/agentic_cpu_launch.sh
RUN_DIR=${RUN_DIR:-runs/$(basename "$HERE")-cpu}  # a copy of this folder: its own
INSTANCES=${INSTANCES:-$HERE/data/instances.jsonl}
PROMPT_DATA=${PROMPT_DATA:-}
if [ -z "$PROMPT_DATA" ]; then  # the instances' training rows (also on --dry-run: the flags are checked against them)
    PROMPT_DATA="$RUN_DIR/train.jsonl"
    python -m slime.agentic.swe.instances --instances "$INSTANCES" --out "$PROMPT_DATA" >&2
fi
ROLLOUT_ARGS=(
    --prompt-data "$PROMPT_DATA" --input-key text --metadata-key metadata --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_swe_remote.generate
    --custom-rm-path generate_with_swe_remote.reward_func --reward-key score
    --swe-instances "$INSTANCES" --env-workers "${ENV_WORKERS:-1}" --env-provider swe
    --max-turns "${MAX_STEPS:-8}"
    --num-rollout "${NUM_ROLLOUT:-20}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-2}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 1
    --rollout-max-response-len 384 --rollout-max-context-len 8192 --rollout-temperature 1.0
)
case "${SAMPLE_UNIT:-step}" in  # step: one sample per step (upstream's); trajectory: one per episode, observations masked
    step) ROLLOUT_ARGS+=(--dynamic-history) ;;
    trajectory) ;;
    *) echo "error: SAMPLE_UNIT must be step or trajectory, got '${SAMPLE_UNIT}'" >&2; exit 2 ;;
esac
agentic_cpu_rl_args "${ROLLOUT_ARGS[@]}"
SWE_ARGS=()
if [ -n "${SWE_BACKEND:-}" ]; then  # where the pool servers run an instance: bwrap (the default) or docker
    SWE_ARGS+=(--swe-backend "$SWE_BACKEND")
fi
if [ -n "${SWE_IMAGE:-}" ]; then  # with docker: swebench, swe-gym or an image template
    SWE_ARGS+=(--swe-image "$SWE_IMAGE")
fi
agentic_cpu_env_args "${SWE_ARGS[@]}"  # ENV_SERVER_URL, the backend, STEP_JUDGE (a per-step PRM)

SUMMARY=$(cat <<'PY'
backend = (f"backend {args.swe_backend}, " if args.swe_backend else "") + \
          (f"image {args.swe_image}, " if args.swe_image else "")
print(f"SWE RL: {args.rollout_batch_size} instances x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} steps, one sample per {'step' if args.dynamic_history else 'trajectory'}; " + environments(f"{backend}instances {args.swe_instances}"))
PY
)
agentic_cpu_launch ", the environment service as child processes" "$SUMMARY" "$@"
