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
cat > prices.py <<'PY'
"""Shop prices."""

DISCOUNT = 0.10

CURRENCY = "EUR"
ROUNDING = 2
# the tax rate applies after the discount

TAX = 0.20


def total(net):
    return round(net * (1 - DISCOUNT) * (1 + TAX), ROUNDING)


if __name__ == "__main__":
    for net in (100, 250, 19.99):
        print(f"{net} -> {total(net)}")
PY
git add -A && commit "Add price calculator"
printf '# Prices\n' > README.md && git add -A && commit "Add README"
sed -i 's/^DISCOUNT = 0.10$/DISCOUNT = 1.10/' prices.py && git add -A && commit "Change discount rate"
sed -i 's/^TAX = 0.20$/TAX = 0.21/' prices.py && git add -A && commit "Update tax to 21%"
printf '# Prices\n\nRun python3 prices.py\n' > README.md && git add -A && commit "Document usage"
