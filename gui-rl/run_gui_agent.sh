#!/usr/bin/env bash
# GUI RL: the entry point of the usage guide. Picks the launch script by the device and the model, and says which:
#   a GPU visible  run_qwen3vl_8b_gui.sh with the model as HF_CKPT (a Qwen3-VL checkpoint folder; required)
#   CPU only       run_cpu_tiny_vlm_gui.sh (screenshots) for a vision-language model (`tiny-vlm`, or a folder whose
#                  config has a vision tower, e.g. Qwen2.5-VL), else run_cpu_smollm2_gui_text.sh (the OCR text view)
#                  for a text model (default: smollm2, the embedded SmolLM2-135M-Instruct)
#   bash gui-rl/run_gui_agent.sh [--model NAME|FOLDER] [--dry-run] [extra trainer flags]
# --model (anywhere among the arguments; else HF_CKPT): the policy. FORCE_DEVICE=cpu|gpu skips the detection
# (scripts/method_entry.sh). Each script's header lists its environment variables.
# shellcheck source=scripts/method_entry.sh
source "$(dirname "$0")/../scripts/method_entry.sh"

gui_usage() {
    sed -n '2,/^[^#]/p' "$0" | grep '^#' | grep -v shellcheck | sed 's/^# \{0,1\}//'
}

model=${HF_CKPT:-}
passed=()
while [ $# -gt 0 ]; do
    case "$1" in
        --model)
            if [ $# -lt 2 ]; then
                echo "error: $ENTRY_NAME: --model needs a value" >&2; gui_usage >&2; exit 2
            fi
            model=$2
            shift ;;
        --model=*) model=${1#--model=} ;;
        -h | --help) gui_usage; exit 0 ;;
        *) passed+=("$1") ;;
    esac
    shift
done
set -- "${passed[@]}"

detect_device
if [ "$DEVICE" = gpu ]; then
    [ -n "$model" ] || entry_fail "$DEVICE_REASON: the GPU script needs the model: --model /path/to/Qwen3-VL-8B (or HF_CKPT)"
    export HF_CKPT=$model
    echo "$ENTRY_NAME: $DEVICE_REASON: running the GPU script gui-rl/run_qwen3vl_8b_gui.sh with $model (screenshots)" >&2
    exec bash "$ENTRY_DIR/run_qwen3vl_8b_gui.sh" "$@"
fi

if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$ENTRY_ROOT/.venv/bin/activate" ]; then
    # shellcheck disable=SC1091
    . "$ENTRY_ROOT/.venv/bin/activate"
fi
model=${model:-smollm2}
# a vision-language model sees screenshots; anything else gets the text view (slime.models.vision.is_vision_config)
kind=$(python - "$model" <<'PY'
import json
import sys
from pathlib import Path

from slime.models.vision import is_vision_config

name = sys.argv[1]
folder = Path(name).expanduser()
if folder.is_dir():
    config = folder / "config.json"
    if not config.is_file():
        sys.exit(f"error: {name} is a folder but holds no config.json: not a HF model folder")
    print("vision" if is_vision_config(json.loads(config.read_text())) else "text")
else:  # a built-in name (slime.models.registry): only tiny-vlm is a vision-language model
    print("vision" if name.lower() == "tiny-vlm" else "text")
PY
) || exit 2
export HF_CKPT=$model
if [ "$kind" = vision ]; then
    echo "$ENTRY_NAME: $DEVICE_REASON: running the CPU script gui-rl/run_cpu_tiny_vlm_gui.sh with $model (a vision-language model: screenshots)" >&2
    exec bash "$ENTRY_DIR/run_cpu_tiny_vlm_gui.sh" "$@"
fi
echo "$ENTRY_NAME: $DEVICE_REASON: running the CPU script gui-rl/run_cpu_smollm2_gui_text.sh with $model (a text model: the OCR text view)" >&2
exec bash "$ENTRY_DIR/run_cpu_smollm2_gui_text.sh" "$@"
