#!/bin/bash
set -euo pipefail
cat > /app/report.py <<'PY'
import sys


def totals(path):
    sums = {}
    with open(path) as f:
        next(f)  # header
        for line in f:
            date, category, description, amount = line.strip().split(",")
            sums[category] = sums.get(category, 0) + float(amount)
    return sums


if __name__ == "__main__":
    for category, total in sorted(totals(sys.argv[1]).items()):
        print(f"{category}: {total:.2f}")
PY
cat > /app/expenses.csv <<'CSV'
date,category,description,amount
2024-01-02,food,"Lunch, with team",23.50
2024-01-03,travel,Train ticket,41.00
2024-01-05,food,Coffee,3.20
2024-01-09,office,"Paper, pens, and tape",12.75
CSV
