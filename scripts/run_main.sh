#!/usr/bin/env bash
# Set up the environment (if needed) and run the main job on the embedded default model (SmolLM2-135M-Instruct).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec python scripts/main_job.py "$@"
