#!/bin/bash
cat > /app/report.py <<'PY'
import csv
import sys


def totals(path):
    sums = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            sums[row["category"]] = sums.get(row["category"], 0) + float(row["amount"])
    return sums


if __name__ == "__main__":
    for category, total in sorted(totals(sys.argv[1]).items()):
        print(f"{category}: {total:.2f}")
PY
