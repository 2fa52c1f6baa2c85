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

PROMPTS=data/digits_train.jsonl
RUN_DIR=runs/digits_cpu
if [ ! -f "$PROMPTS" ]; then
    python -m slime.tasks.digits --out "$PROMPTS" --n 2000 --seed 0
fi
mkdir -p runs
# Two runs at once would delete each other's folder: the second one waits for the first.
exec 9>runs/.digits_cpu.lock
flock 9
rm -rf "$RUN_DIR"  # metrics.jsonl is appended to: a fresh folder keeps one curve per run
PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

torchrun --nproc_per_node=2 --master_port "$PORT" slime/train_async.py \
    --hf-checkpoint tiny-digits \
    --prompt-data "$PROMPTS" --apply-chat-template \
    --custom-rm-path slime.tasks.digits.reward \
    --rollout-batch-size 32 --n-samples-per-prompt 8 \
    --num-rollout 40 \
    --rollout-max-response-len 4 --rollout-temperature 1.0 \
    --lr 1e-3 \
    --seed 1 \
    --run-dir "$RUN_DIR" \
    "$@"

python - "$RUN_DIR/metrics.jsonl" <<'EOF'
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8") if line.strip()]
# The rollout-level metrics (reward, timings) are merged into the last optimizer step of each rollout.
curve = [row["rollout/raw_reward"] for row in rows if "rollout/raw_reward" in row]
if not curve:
    sys.exit(f"no rollout/raw_reward in {sys.argv[1]}")
print(f"\nreward curve ({sys.argv[1]}): mean exact-match reward per rollout")
for i, reward in enumerate(curve, 1):
    print(f"rollout {i:2d}: {reward:.2f}  {'#' * round(reward * 40)}")
k = min(3, len(curve))
first, last = sum(curve[:k]) / k, sum(curve[-k:]) / k
print(f"mean reward, first {k} rollouts {first:.2f} -> last {k} rollouts {last:.2f} ({last - first:+.2f})")
if last < first + 0.3:
    sys.exit("the reward did not rise by 0.3: no clear learning")
EOF
