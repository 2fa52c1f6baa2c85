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
for v in 1.0.0 1.1.0 1.2.0 1.3.0; do
  printf 'fix %s\n' "$v" >> CHANGES.md; git add -A; commit "Fix issues before $v"
  printf '%s\n' "$v" > VERSION; git add -A; commit "Bump version to $v"
  printf 'feature after %s\n' "$v" >> FEATURES.md; git add -A; commit "Add feature after $v (mentions: Bump version to $v)"
done
