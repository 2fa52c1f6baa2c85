#!/usr/bin/env bash
# Tool-call RL (ReTool) on Qwen3-4B, full fine-tuning: the policy (upstream: the ReTool SFT checkpoint of Qwen3-4B)
# solves the maths problems of toolcall-rl/data/train.jsonl calling a Python code interpreter that runs in the sandbox
# (slime.agentic.sandbox), and learns from the outcome (the last \boxed{} compared by value with the label, with
# upstream's tool-use shaping over successful calls). GRPO over 8 samples per problem, PPO clip 0.2/0.28, KL k3 0.01
# to the SFT checkpoint, lr 1e-6, asynchronous training (train_async.py); upstream's retool_qwen3_4b_rl.sh values.
# Hardware: one node with 8 GPUs (80 GB class): 4 trainer ranks (tensor parallel 4) + 2 policy engines (TP2, SGLang
# mem fraction 0.6). PRM=1: upstream's PRM layout, 2 trainer ranks (TP2) + 2 policy engines (TP2) + 1 PRM engine
# (TP2) that votes on every step (m 3, temperature 1.0, 2048 tokens), advantages step_wise.
#   HF_CKPT=/models/qwen3-4b-retool-sft bash toolcall-rl/run_qwen3_4b_retool.sh [--dry-run] [extra trainer flags]
# --dry-run (or DRY_RUN=1) prints the tool-call setting, the resolved GPU layout and the full command and starts
# nothing. Layout and multi-node variables (NUM_GPUS, ACTOR_GPUS, ROLLOUT_GPUS, PRM_GPUS, ROLLOUT_TP, PRM_TP, TRAIN_TP,
# NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, ROLLOUT_ENGINE, TRAIN_BACKEND): scripts/README.md, "GPU layout".
# Env: HF_CKPT (required: a folder; nothing is downloaded), PROMPT_DATA (toolcall-rl/data/train.jsonl), TOOLS_CONFIG
#      (toolcall-rl/tools.json), SAVE_CKPT (ckpt/qwen3-4b-retool, -prm with PRM=1), MAX_TURNS (16), MAX_TOOL_CALLS
#      (16), TOOL_TIMEOUT (120 s), NUM_ROLLOUT (3000), ROLLOUT_BATCH_SIZE (32 problems), N_SAMPLES (8 per problem),
#      MEM_FRACTION_STATIC (0.6), REASONING_PARSER (qwen3), MAX_TOKENS_PER_GPU (16384), DYNAMIC_HISTORY=1 (one sample
#      per step, GRPO over trajectories), PRM=1 with PRM_MODEL_PATH (a Qwen3-4B; default HF_CKPT), PRM_M (3),
#      PRM_TEMPERATURE (1.0), PRM_MAX_NEW_TOKENS (2048), PRM_STEP_COEF (1.0), EVAL_INTERVAL (20), EVAL_DATA
#      (toolcall-rl/data/heldout.jsonl, evaluated through the tool-call loop). Defaults: this script's folder (a
#      copy runs its own data and generate_with_retool.py); relative paths given: from the repository root.
# Status: engines are SGLang servers (--rollout-engine sglang), each pinned to its own GPUs; the trainer is the fsdp
# backend. The layout, the command and its flags are verified on CPU (tests/unit/test_launch_scripts.py); not yet run
# on a GPU machine.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "${SLIME_ROOT:-$HERE/..}" && pwd)"
cd "$ROOT"
# shellcheck source=scripts/agentic_gpu_launch.sh
source scripts/agentic_gpu_launch.sh
for name in PRM DYNAMIC_HISTORY; do
    case "${!name:-0}" in
        0 | 1) ;;
        *) echo "error: $name must be 1 or 0, got '${!name}'" >&2; exit 2 ;;
    esac
done

HF_CKPT=${HF_CKPT:?set HF_CKPT to the ReTool SFT checkpoint of Qwen3-4B (a folder; nothing is downloaded)}
ROLLOUT_GPUS=${ROLLOUT_GPUS:-4} ROLLOUT_TP=${ROLLOUT_TP:-${TP:-2}}  # TP: the name older scripts used
if [ "${PRM:-0}" = 1 ]; then  # upstream's PRM layout: 2 + 4 + 2
    ACTOR_GPUS=${ACTOR_GPUS:-2} TRAIN_TP=${TRAIN_TP:-2} PRM_GPUS=${PRM_GPUS:-2} PRM_TP=${PRM_TP:-2}
    name=qwen3-4b-retool-prm
else
    ACTOR_GPUS=${ACTOR_GPUS:-4} TRAIN_TP=${TRAIN_TP:-4} PRM_GPUS=${PRM_GPUS:-0} PRM_TP=${PRM_TP:-$ROLLOUT_TP}
    name=qwen3-4b-retool
fi
agentic_gpu_layout PRM_GPUS PRM_TP  # the rest of the layout's defaults, each an integer
if [ "${PRM:-0}" != 1 ] && [ "$PRM_GPUS" != 0 ]; then
    echo "error: PRM_GPUS=$PRM_GPUS but PRM=1 is not set: the PRM engines run only with PRM=1" >&2; exit 2
fi

# The data and the tool-call loop. No --apply-chat-template: generate_with_retool.generate renders the prompt
# itself (system prompt, the tools of --tools-config, the problem as the user message) with the policy's chat
# template; with --apply-chat-template the data source would hand it an already templated string, which the loop
# would then wrap as a user message and template a second time.
ROLLOUT_ARGS=(
    --prompt-data "${PROMPT_DATA:-$HERE/data/train.jsonl}" --input-key prompt --label-key label --rollout-shuffle
    --extra-python-path "$HERE" --custom-generate-function-path generate_with_retool.generate
    --custom-rm-path generate_with_retool.reward_func --reward-key score
    --tools-config "${TOOLS_CONFIG:-$HERE/tools.json}" --max-turns "${MAX_TURNS:-16}"
    --max-tool-calls "${MAX_TOOL_CALLS:-16}" --tool-timeout "${TOOL_TIMEOUT:-120}"
    --num-rollout "${NUM_ROLLOUT:-3000}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-32}"
    --n-samples-per-prompt "${N_SAMPLES:-8}" --num-steps-per-rollout 2
    --rollout-max-response-len 8192 --rollout-max-context-len 16384 --rollout-temperature 1
    --balance-data  # upstream's; accepted, no effect on our backends (dynamic batches are packed by tokens)
    # evaluated every 20 rollouts as upstream (it used AIME-24), here on the held-out problems through the same loop
    --eval-interval "${EVAL_INTERVAL:-20}" --eval-prompt-data heldout "${EVAL_DATA:-$HERE/data/heldout.jsonl}"
    --eval-reward-key acc
)
# GRPO (PRM=1: step_wise), PPO clip 0.2/0.28, KL k3 0.01 to the SFT checkpoint, upstream's optimizer.
ALGORITHM_ARGS=("${AGENTIC_PPO_ARGS[@]}")
# SGLang engines: upstream's mem fraction; the reasoning parser keeps a Qwen3 judge's thinking out of the vote it
# returns (the policy's turns go through /generate, which no parser touches).
SGLANG_ARGS=(--sglang-mem-fraction-static "${MEM_FRACTION_STATIC:-0.6}"
             --sglang-reasoning-parser "${REASONING_PARSER:-qwen3}")
ADVANTAGE_ARGS=(--advantage-estimator grpo)
if [ "${PRM:-0}" = 1 ]; then
    ADVANTAGE_ARGS=(--advantage-estimator step_wise
              --prm-enable --prm-num-gpus "$PRM_GPUS" --prm-num-gpus-per-engine "$PRM_TP"
              --prm-model-path "${PRM_MODEL_PATH:-$HF_CKPT}" --prm-m "${PRM_M:-3}"
              --prm-temperature "${PRM_TEMPERATURE:-1.0}" --prm-max-new-tokens "${PRM_MAX_NEW_TOKENS:-2048}"
              --prm-step-coef "${PRM_STEP_COEF:-1.0}")
fi
if [ "${DYNAMIC_HISTORY:-0}" = 1 ]; then
    ADVANTAGE_ARGS+=(--dynamic-history)
fi
# upstream's --rotary-base 5e6 (the SFT checkpoint's RoPE base): the megatron backend checks it against the
# checkpoint's config.json, the fsdp backend reads the config itself and reports the flag as without effect
agentic_gpu_command 5000000 "${SAVE_CKPT:-$ROOT/ckpt/$name}" 20 \
    "${SGLANG_ARGS[@]}" "${ROLLOUT_ARGS[@]}" "${ALGORITHM_ARGS[@]}" "${ADVANTAGE_ARGS[@]}"

# One line on the tool-call setting, from the flags the trainer gets (extra flags included), then the launcher
# prints the layout and the command (and, without --dry-run, execs torchrun).
SUMMARY=$(cat <<'PY'
prm = (f", PRM per step ({args.prm_m} votes at temperature {args.prm_temperature}, {args.prm_max_new_tokens} tokens "
       f"each, coef {args.prm_step_coef})" if args.prm_enable else "")
print(f"tool-call RL: {args.rollout_batch_size} problems x {args.n_samples_per_prompt} samples per rollout, "
      f"at most {args.max_turns} turns / {args.max_tool_calls} calls ({args.tool_timeout:g} s each), tools "
      f"{args.tools_config}, advantages {args.advantage_estimator}{prm}"
      + (", dynamic history" if args.dynamic_history else ""))
PY
)
agentic_gpu_launch "$SUMMARY" "$@"
