#!/usr/bin/env bash
# Proof of learning on one GPU: the digit task of run_digits_cpu.sh with the trainer and the embedded engine on
# CUDA (`--device cuda`: the trainer wraps the model in FSDP, the engine serves bfloat16 weights), one torchrun rank.
# Checks that the GPU code paths of the trainer run and learn, with no SGLang, Megatron or model download needed
# (the tiny warm-started policy is built locally). Writes runs/digits_gpu/<mode>/ and exits 1 unless the mean
# reward of the last 3 rollouts is at least 0.3 above that of the first 3 in every mode run.
#
#   bash scripts/run_digits_gpu.sh [async|sync|lora|all] [extra trainer flags]
#       async: slime/train_async.py, full fine-tuning (the default); sync: slime/train.py; lora: train.py --use-lora
#   SKIP_SETUP=1: use the Python environment in hand (slime importable, CUDA torch) instead of scripts/setup_env.sh
#   DEVICE=cpu: the same runs on the CPU (a check of the script itself where no GPU is; slow)
#
# About a minute per mode on an H100 (the first run also builds the cached tiny-digits policy).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-async}
case "$MODE" in async|sync|lora|all) shift || true ;; -*) MODE=async ;; *) echo "unknown mode $MODE" >&2; exit 2 ;; esac
if [ -z "${SKIP_SETUP:-}" ]; then
    bash scripts/setup_env.sh
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
PYTHON=${PYTHON:-python}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ]; then
    "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else "run_digits_gpu: torch sees no CUDA device")'
    DEVICE_NAME=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name())')
else
    DEVICE_NAME=$DEVICE
fi
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# shellcheck source=scripts/digits_common.sh
. scripts/digits_common.sh
digits_prompts "$PYTHON"

run_mode() {  # run_mode <mode> [extra flags]: one training run and its curve check
    local mode=$1 entry=slime/train_async.py; shift
    local flags=()
    case "$mode" in sync) entry=slime/train.py ;; lora) entry=slime/train.py; flags=(--use-lora --lr 5e-3) ;; esac
    local run_dir=runs/digits_gpu/$mode
    rm -rf "$run_dir"  # metrics.jsonl is appended to: a fresh folder keeps one curve per run
    mkdir -p "$run_dir"
    echo "[run_digits_gpu] $mode: $entry on $DEVICE_NAME"
    "$PYTHON" -m torch.distributed.run --nproc_per_node=1 --master_port "$(free_port "$PYTHON")" "$entry" \
        --device "$DEVICE" "${DIGITS_FLAGS[@]}" --run-dir "$run_dir" "${flags[@]}" "$@"
    "$PYTHON" -m slime.tasks.digits --curve "$run_dir/metrics.jsonl" --min-gain 0.3
}

if [ "$MODE" = all ]; then
    status=0
    for mode in async sync lora; do run_mode "$mode" "$@" || status=1; done
    exit $status
fi
run_mode "$MODE" "$@"
