#!/usr/bin/env bash
# Set up the environment (if needed) and run the main job on the embedded default model (SmolLM2-135M-Instruct):
# the conversation RL server with the Combine method (openclaw-combine/run_cpu_smollm2_openclaw_combine.sh). It serves an OpenAI-compatible API on
# http://127.0.0.1:30000/v1 (HOST/PORT to change), judges every turn from the next message and trains in the
# background. Ctrl-C stops it cleanly (checkpoint, engine and proxy stopped). Extra arguments go to the trainer.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. scripts/prepare_smollm2.sh
exec bash openclaw-combine/run_cpu_smollm2_openclaw_combine.sh "$@"
