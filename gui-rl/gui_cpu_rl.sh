# Sourced (after scripts/agentic_cpu_launch.sh) by the GUI setting's RL scripts on a CPU: run_cpu_smollm2_gui_text.sh
# (text observations) and run_cpu_tiny_vlm_gui.sh (screenshots). Each passes its own defaults and flags:
#   gui_cpu_rl_args STEPS ROLLOUTS SAMPLES RESPONSE_LEN [FLAG ..]  ARGS: the tasks' training rows (PROMPT_DATA, else the
#       training split of TASKS_DIR written to RUN_DIR/train.jsonl, also on --dry-run: the flags are checked against
#       them), the GUI loop (this folder's generate_with_gui.py, its TASKS_DIR and APPS_DIR, the FLAGs, ENV_WORKERS
#       pool servers), MAX_STEPS (STEPS) steps per episode, NUM_ROLLOUT (ROLLOUTS) rollouts of ROLLOUT_BATCH_SIZE (2)
#       tasks x N_SAMPLES (SAMPLES) episodes, RESPONSE_LEN tokens per step, then agentic_cpu_rl_args and
#       agentic_cpu_env_args
gui_cpu_rl_args() {
    local steps=$1 rollouts=$2 samples=$3 response_len=$4
    shift 4
    TASKS_DIR=${TASKS_DIR:-$HERE/tasks}
    PROMPT_DATA=${PROMPT_DATA:-}
    if [ -z "$PROMPT_DATA" ]; then
        PROMPT_DATA="$RUN_DIR/train.jsonl"
        python -m slime.agentic.gui.tasks --tasks-dir "$TASKS_DIR" --split train --out "$PROMPT_DATA"
    fi
    agentic_cpu_rl_args \
        --prompt-data "$PROMPT_DATA" --input-key prompt --metadata-key metadata --rollout-shuffle \
        --extra-python-path "$HERE" --custom-generate-function-path generate_with_gui.generate \
        --custom-rm-path generate_with_gui.reward_func --reward-key score \
        --gui-tasks-dir "$TASKS_DIR" --gui-apps-dir "${APPS_DIR:-$HERE/apps}" "$@" \
        --env-workers "${ENV_WORKERS:-1}" --env-provider gui \
        --max-turns "${MAX_STEPS:-$steps}" --dynamic-history \
        --num-rollout "${NUM_ROLLOUT:-$rollouts}" --rollout-batch-size "${ROLLOUT_BATCH_SIZE:-2}" \
        --n-samples-per-prompt "${N_SAMPLES:-$samples}" --num-steps-per-rollout 1 \
        --rollout-max-response-len "$response_len" --rollout-max-context-len 4096 --rollout-temperature 1.0
    agentic_cpu_env_args  # ENV_SERVER_URL, STEP_JUDGE (a per-step PRM: the outcome plus its score)
}
