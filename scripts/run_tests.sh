#!/usr/bin/env bash
# Set up the environment (if needed) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# the real OpenClaw client (Node 24 + npm openclaw) and our plugin for tests/e2e/test_openclaw_*.py; skipped when done
bash scripts/setup_openclaw.sh
# PostgreSQL's server binaries for the store's PostgreSQL tests (Debian's postgresql, only when missing)
bash scripts/setup_postgres.sh
# shellcheck disable=SC1091
. .venv/bin/activate
# One intra-op thread per process: on a loaded 2-core machine two threads are many times slower.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec python -m pytest "$@"
