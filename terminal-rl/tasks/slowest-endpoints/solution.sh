#!/bin/bash
awk '{ split($7, p, "?"); ms = $NF; sub(/ms$/, "", ms); sum[p[1]] += ms; n[p[1]]++ }
     END { for (k in sum) printf "%s %.1f\n", k, sum[k] / n[k] }' /app/access.log \
  | sort -k2,2nr | head -n 3 > /app/slowest.txt
