# Sourced (no arguments) by the CPU launch scripts from the repository root (scripts/conversation_cpu.sh, and
# scripts/agentic_cpu_launch.sh for the agentic settings' run_cpu_*.sh): takes --dry-run out of the caller's
# arguments wherever it lands (DRY_RUN=1; also from the environment), activates .venv when no environment is active,
# and sets one intra-op thread per process and an offline Hugging Face stack.
# shellcheck source=scripts/dry_run_flag.sh
source "$(dirname "${BASH_SOURCE[0]}")/dry_run_flag.sh"
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
    # shellcheck disable=SC1091
    . .venv/bin/activate
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
