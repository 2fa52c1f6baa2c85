# Shared by the method entry points (sourced, not run by itself): openclaw-rl/run_binary_rl.sh,
# openclaw-opd/run_opd_training.sh, openclaw-combine/run_combine_training.sh. Each calls
#     run_method_entry <rl|opd|combine> "$@"
# which picks the launch script of the calling folder and execs it:
#   GPUs visible -> run_qwen3_4b_openclaw_<method>.sh (run_qwen3_4b_openclaw_<method>_lora.sh with LoRA)
#   otherwise    -> run_cpu_smollm2_openclaw_<method>.sh (plus --use-lora with LoRA)
# and says which one and why (one line on stderr). <method> becomes <method>_topk when the config's
# training.method is the top-K variant (opd_topk, combine_topk).
#
# Arguments (anywhere; everything else is passed to the launch script as trainer flags):
#   --lora                 LoRA (also USE_LORA=1, or training.lora.enabled in the config); LORA_RANK, LORA_ALPHA,
#                          LORA_DROPOUT become --lora-rank / --lora-alpha / --lora-dropout
#   --config FILE [k=v ..] a YAML training config (config/README.md) mapped onto trainer flags by
#                          `python -m slime.launch.training_config`, with Hydra-style overrides right after it
#   --dry-run              passed to the launch script: print the layout and the full command, start nothing
#   -h, --help             this text
# Env: FORCE_DEVICE=cpu|gpu skips the detection. A GPU is visible when `nvidia-smi -L` lists one and
# CUDA_VISIBLE_DEVICES is not set to "" (or -1). Trainer flags, lowest precedence first: the launch script's
# defaults, the config, the LoRA variables, the command line.
set -euo pipefail
ENTRY_DIR="$(cd "$(dirname "$0")" && pwd)"  # the calling method folder
ENTRY_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENTRY_NAME="$(basename "$0")"

entry_usage() {  # the calling script's header, then the options above
    sed -n '2,/^[^#]/p' "$0" | grep '^#' | grep -v shellcheck | sed 's/^# \{0,1\}//'
    sed -n '/^# Arguments/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

entry_fail() {
    echo "error: $ENTRY_NAME: $*" >&2
    exit 2
}

# DEVICE=gpu|cpu and DEVICE_REASON, from FORCE_DEVICE, CUDA_VISIBLE_DEVICES and `nvidia-smi -L`.
detect_device() {
    case "${FORCE_DEVICE:-}" in
        gpu | GPU) DEVICE=gpu DEVICE_REASON="FORCE_DEVICE=${FORCE_DEVICE}"; return ;;
        cpu | CPU) DEVICE=cpu DEVICE_REASON="FORCE_DEVICE=${FORCE_DEVICE}"; return ;;
        "") ;;
        *) entry_fail "FORCE_DEVICE must be cpu or gpu, got '${FORCE_DEVICE}'" ;;
    esac
    DEVICE=cpu
    if [ "${CUDA_VISIBLE_DEVICES+set}" = set ] && { [ -z "$CUDA_VISIBLE_DEVICES" ] || [ "$CUDA_VISIBLE_DEVICES" = -1 ]; }; then
        DEVICE_REASON="no GPU visible (CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}' hides them)"
        return
    fi
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        DEVICE_REASON="no GPU visible (nvidia-smi not found)"
        return
    fi
    local listing count
    if ! listing=$(timeout 30 nvidia-smi -L 2>/dev/null); then
        DEVICE_REASON="no GPU visible (nvidia-smi -L failed)"
        return
    fi
    count=$(grep -c '^GPU [0-9]' <<<"$listing" || true)
    if [ "$count" = 0 ]; then
        DEVICE_REASON="no GPU visible (nvidia-smi -L lists none)"
        return
    fi
    DEVICE=gpu DEVICE_REASON="$count GPU(s) visible (nvidia-smi -L)"
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        DEVICE_REASON="$DEVICE_REASON, CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
    fi
}

# A Hydra-style override: key=value, +key=value, ++key=value, ~key.
is_override() {
    [[ $1 =~ ^(\+\+?)?[A-Za-z_][A-Za-z0-9_.]*=|^~[A-Za-z_][A-Za-z0-9_.]*(=|$) ]]
}

run_method_entry() {
    local method=$1
    shift
    local lora=0 lora_reason="" config="" overrides=() passed=()
    case "${USE_LORA:-}" in
        "" | 0 | false | no | off) ;;
        1 | true | yes | on) lora=1 lora_reason="USE_LORA=$USE_LORA" ;;
        *) entry_fail "USE_LORA must be 1 or 0, got '$USE_LORA'" ;;
    esac
    while [ $# -gt 0 ]; do
        case "$1" in
            --lora) lora=1 lora_reason="--lora" ;;
            -h | --help) entry_usage; exit 0 ;;
            --config | --config=*)
                if [ "$1" = --config ]; then
                    [ $# -ge 2 ] || entry_fail "--config needs a YAML file"
                    config=$2
                    shift
                else
                    config=${1#--config=}
                fi
                while [ $# -ge 2 ] && is_override "$2"; do
                    overrides+=("$2")
                    shift
                done ;;
            *) passed+=("$1") ;;
        esac
        shift
    done

    local run_method=$method config_flags=() i
    if [ -n "$config" ]; then
        if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$ENTRY_ROOT/.venv/bin/activate" ]; then
            # shellcheck disable=SC1091
            . "$ENTRY_ROOT/.venv/bin/activate"
        fi
        local words=() out status=0
        out=$(mktemp)
        python -m slime.launch.training_config --null --print-method --method "$method" "$config" \
            "${overrides[@]}" >"$out" || status=$?
        if [ "$status" != 0 ]; then
            rm -f "$out"
            exit "$status"
        fi
        mapfile -d '' -t words <"$out"
        rm -f "$out"
        run_method=${words[0]}
        config_flags=("${words[@]:1}")
        for ((i = 0; i < ${#config_flags[@]}; i++)); do
            case "${config_flags[i]}" in
                --use-lora)
                    if [ "$lora" = 0 ]; then lora=1 lora_reason="training.lora.enabled in $config"; fi ;;
                --hf-checkpoint)
                    # the GPU scripts take the policy (and the KL reference and default judge) from HF_CKPT
                    if [ -n "${HF_CKPT:-}" ] && [ "$HF_CKPT" != "${config_flags[i + 1]}" ]; then
                        echo "$ENTRY_NAME: the config's model ${config_flags[i + 1]} replaces HF_CKPT=$HF_CKPT" >&2
                    fi
                    export HF_CKPT=${config_flags[i + 1]} ;;
            esac
        done
    fi

    local lora_flags=() name flag
    for name in LORA_RANK LORA_ALPHA LORA_DROPOUT; do
        if [ -n "${!name:-}" ]; then
            if [ "$lora" = 1 ]; then
                flag=${name,,}
                lora_flags+=("--${flag//_/-}" "${!name}")
            else
                echo "$ENTRY_NAME: $name is set but LoRA is not selected (--lora or USE_LORA=1): ignored" >&2
            fi
        fi
    done

    detect_device
    local script kind how=""
    if [ "$DEVICE" = gpu ]; then
        kind=GPU script=run_qwen3_4b_openclaw_${run_method}.sh
        if [ "$lora" = 1 ]; then
            script=run_qwen3_4b_openclaw_${run_method}_lora.sh how=" (LoRA: $lora_reason)"
        fi
    else
        kind=CPU script=run_cpu_smollm2_openclaw_${run_method}.sh
        if [ "$lora" = 1 ]; then
            lora_flags=(--use-lora "${lora_flags[@]}") how=" with --use-lora ($lora_reason)"
        fi
    fi
    [ -f "$ENTRY_DIR/$script" ] || entry_fail "$DEVICE_REASON, but there is no $kind script $script in ${ENTRY_DIR#"$ENTRY_ROOT"/}"
    if [ -n "$config" ]; then
        how="$how, trainer flags from $config appended"
    fi
    echo "$ENTRY_NAME: $DEVICE_REASON: running the $kind script ${ENTRY_DIR#"$ENTRY_ROOT"/}/$script$how" >&2

    exec bash "$ENTRY_DIR/$script" "${config_flags[@]}" "${lora_flags[@]}" "${passed[@]}"
}
