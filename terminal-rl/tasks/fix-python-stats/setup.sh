#!/bin/bash
set -euo pipefail
cat > /app/stats.py <<'PY'
import sys


def read_numbers(path):
    numbers = []
    with open(path) as f:
        for line in f:
            numbers.append(int(line))
    return numbers


def mean(xs):
    return sum(xs) / (len(xs) - 1)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n % 2 == 1:
        return xs[n // 2]
    return (xs[n // 2] + xs[n // 2 + 1]) / 2


if __name__ == "__main__":
    nums = read_numbers(sys.argv[1])
    print(f"count={len(nums)}")
    print(f"mean={mean(nums):.2f}")
    print(f"median={median(nums):.2f}")
PY
printf '4\n8\n15\n16\n23\n42\n' > /app/numbers.txt
