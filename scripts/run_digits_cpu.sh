#!/usr/bin/env bash
# Proof of learning on CPU: async GRPO (slime/train_async.py, 2 torchrun ranks + the embedded engine) on the
# digit task ("Repeat this digit: 7" -> "7", exact-match reward) from the tiny warm-started policy, which
# answers right ~23% of the time. Seeded. Writes runs/digits_cpu/ (replaced on every run) and ends with the
# reward curve read from runs/digits_cpu/metrics.jsonl (mean reward of each rollout's 256 samples); exits 1
# if the mean reward of the last 3 rollouts is not at least 0.3 above that of the first 3.
#
#   bash scripts/run_digits_cpu.sh [extra trainer flags, e.g. --num-rollout 30 --seed 2]
#
# A few minutes on a 2-core CPU (the first run also builds the cached tiny-digits policy, ~15 s).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
# shellcheck disable=SC1091
. .venv/bin/activate
# One intra-op thread per process: 2 trainer ranks + 1 engine process share the cores.
export OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# shellcheck source=scripts/digits_common.sh
. scripts/digits_common.sh
RUN_DIR=runs/digits_cpu
digits_prompts python
mkdir -p runs
# Two runs at once would delete each other's folder: the second one waits for the first.
exec 9>runs/.digits_cpu.lock
flock 9
rm -rf "$RUN_DIR"  # metrics.jsonl is appended to: a fresh folder keeps one curve per run

torchrun --nproc_per_node=2 --master_port "$(free_port python)" slime/train_async.py \
    "${DIGITS_FLAGS[@]}" --run-dir "$RUN_DIR" "$@"

python -m slime.tasks.digits --curve "$RUN_DIR/metrics.jsonl" --min-gain 0.3
