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
#      ENV_WORKERS pool servers, default 1), RUN_DIR (runs/swe-cpu), ROLLOUT_BATCH_SIZE (2 instances), N_SAMPLES (4 per
#      instance), NUM_ROLLOUT (20), MAX_STEPS (8 steps per episode), LR (1e-6), STEP_JUDGE (rules: the CPU rule judge
#      scores every step and advantages are step_wise; module:factory for your own; default none), SWE_BACKEND (bwrap,
#      or docker: --swe-backend), SWE_IMAGE (with docker: swebench, swe-gym or an image template: --swe-image).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${SLIME_ROOT:-$HERE/..}"
cd "$ROOT"
# shellcheck source=scripts/cpu_launch_env.sh
source scripts/cpu_launch_env.sh
RUN_DIR=${RUN_DIR:-runs/swe-cpu}
INSTANCES=${INSTANCES:-$HERE/data/instances.jsonl}
PROMPT_DATA=${PROMPT_DATA:-}
if [ -z "$PROMPT_DATA" ]; then  # the instances' training rows (also on --dry-run: the flags are checked against them)
    PROMPT_DATA="$RUN_DIR/train.jsonl"
    python -m slime.agentic.swe.instances --instances "$INSTANCES" --out "$PROMPT_DATA" >&2
fi
ARGS=(
    --hf-checkpoint "${HF_CKPT:-smollm2}"
    --prompt-data "$PROMPT_DATA" --input-key text --metadata-key metadata --rollout-shuffle
    --custom-generate-function-path slime.agentic.swe.agent.generate
    --custom-rm-path slime.agentic.swe.agent.reward_func --reward-key score
    --swe-instances "$INSTANCES" --env-workers "${ENV_WORKERS:-1}" --env-provider swe
    --max-turns "${MAX_STEPS:-8}" --dynamic-history
    --num-rollout "${NUM_ROLLOUT:-20}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-2}"
    --n-samples-per-prompt "${N_SAMPLES:-4}" --num-steps-per-rollout 1
    --rollout-max-response-len 384 --rollout-max-context-len 8192 --rollout-temperature 1.0
    --advantage-estimator grpo --eps-clip 0.2 --eps-clip-high 0.28
    --use-kl-loss --kl-loss-coef 0.01 --kl-loss-type low_var_kl
    --lr "${LR:-1e-6}" --lr-decay-style constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98
    --run-dir "$RUN_DIR" --save "$RUN_DIR/ckpt" --save-interval 10
)
if [ -n "${ENV_SERVER_URL:-}" ]; then
    ARGS+=(--env-server-url "$ENV_SERVER_URL")
fi
if [ -n "${SWE_BACKEND:-}" ]; then  # where the pool servers run an instance: bwrap (the default) or docker
    ARGS+=(--swe-backend "$SWE_BACKEND")
fi
if [ -n "${SWE_IMAGE:-}" ]; then  # with docker: swebench, swe-gym or an image template
    ARGS+=(--swe-image "$SWE_IMAGE")
fi
if [ -n "${STEP_JUDGE:-}" ]; then  # a per-step PRM: the outcome plus its score
    ARGS+=(--step-judge "$STEP_JUDGE" --advantage-estimator step_wise --prm-step-coef 1.0)
fi
if [ "$DRY_RUN" = 1 ]; then
    python - "${ARGS[@]}" "$@" <<'PY'
import shlex, sys
from slime.utils.arguments import parse_args
args = parse_args(sys.argv[1:], mode="async", world_size=1)
backend = (f"backend {args.swe_backend}, " if args.swe_backend else "") + \
          (f"image {args.swe_image}, " if args.swe_image else "")
service = args.env_server_url or f"{args.env_workers} pool server(s) started by the trainer ({args.env_provider}, " \
                                  f"{backend}instances {args.swe_instances})"
print("layout: CPU, 1 trainer process (rank 0, no torchrun), the embedded engine as its child process, the "
      "environment service as child processes; OMP_NUM_THREADS=1 per process")
print(f"SWE RL: {args.rollout_batch_size} instances x {args.n_samples_per_prompt} episodes per rollout, at most "
      f"{args.max_turns} steps, one sample per step; environments: {service}"
      + (f"; step judge {args.step_judge}, advantages {args.advantage_estimator}" if args.step_judge else ""))
print("python slime/train_async.py " + shlex.join(sys.argv[1:]))
PY
    exit 0
fi
exec python slime/train_async.py "${ARGS[@]}" "$@"
