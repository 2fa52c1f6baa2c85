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
mkdir -p deploy src
printf 'print("app")\n' > src/app.py && git add -A && commit "Initial import"
printf 'region: eu-west-1\n' > deploy/settings.yml && git add -A && commit "Add deployment settings"
printf 'region: eu-west-1\naws_key_id: AKIAEXAMPLE\nAWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n' > deploy/settings.yml
git add -A && commit "Tune deployment for production"
printf 'print("app v2")\n' > src/app.py && git add -A && commit "App v2"
printf 'region: eu-west-1\naws_key_id: AKIAEXAMPLE\n' > deploy/settings.yml && git add -A && commit "Remove credentials"
printf '# Security\nNever commit AWS_SECRET_ACCESS_KEY values.\n' > SECURITY.md && git add -A && commit "Add security notes"
