#!/bin/bash
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
n=0
commit() {  # commit MESSAGE: a commit with a fixed, increasing date (same hashes on every setup)
  n=$((n + 1))
  GIT_AUTHOR_DATE="2024-02-01T10:$(printf '%02d' $n):00Z" GIT_COMMITTER_DATE="2024-02-01T10:$(printf '%02d' $n):00Z" \
    git commit -q -m "$1"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Dana Dev"
git config user.email "dana@example.com"
mkdir -p src/__pycache__ build/lib
printf 'def add(a, b):\n    return a + b\n' > src/calc.py
printf 'PYC1' > src/__pycache__/calc.cpython-311.pyc
printf 'PYC2' > src/old.pyc
printf 'binary' > build/lib/calc.so
printf 'log' > build/build.log
printf '# Calc\n' > README.md
git add -A && commit "Initial commit"
