#!/bin/bash
set -euo pipefail
mkdir -p /app/reports/2023 /app/reports/2024/q1
printf 'month,revenue\njan,100\n' > /app/reports/summary.csv
printf 'month,revenue\njan,80\n' > /app/reports/2023/revenue-2023.csv
printf 'month,revenue\njan,120\n' > /app/reports/2024/q1/revenue-2024-q1.csv
printf 'scratch\n' > /app/reports/2024/q1/draft.csv.tmp
printf 'notes\n' > /app/reports/README.txt
