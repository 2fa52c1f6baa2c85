#!/usr/bin/env bash
# Sourced by the top-level jobs (run_main.sh, openclaw-test/reproduce.sh) from the repository root: set up the
# environment if needed, enter .venv with one torch thread per process and no hub access, and convert the
# embedded default model SmolLM2-135M-Instruct once (with progress).
bash scripts/setup_env.sh
# shellcheck disable=SC1091
. .venv/bin/activate
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python -c "from slime.models import resolve_model_path; resolve_model_path('smollm2')"
