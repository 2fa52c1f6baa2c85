#!/usr/bin/env bash
# Reproduce the results table of openclaw-test/README.md on this machine: every method (rl, opd, combine) x every
# persona (student, teacher, concise, greeter, upbeat) x seeds 0,1,2 on SmolLM2-135M-Instruct, held-out preference and
# quality at 0, 32, 64 and 128 interactions, then the table. About 10-18 minutes per run on a 2-core CPU (45 runs).
#   bash openclaw-test/reproduce.sh [more Hydra overrides, e.g. seed=0 persona=concise,greeter]
# Env: OUT (default runs/openclaw-test/table).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. scripts/prepare_smollm2.sh
OUT=${OUT:-runs/openclaw-test/table}
python openclaw-test/run.py -m method=rl,opd,combine persona=student,teacher,concise,greeter,upbeat seed=0,1,2 \
    "hydra.sweep.dir=$OUT" "$@"
PYTHONPATH="openclaw-test${PYTHONPATH:+:$PYTHONPATH}" python -m personalization.report "$OUT" --out "$OUT/TABLE.md"
