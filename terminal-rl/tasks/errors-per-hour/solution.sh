#!/bin/bash
awk '{ h = substr($1, 1, 13); if (!(h in n)) { order[++k] = h; n[h] = 0 } if ($2 == "ERROR") n[h]++ }
     END { print "hour,errors"; for (i = 1; i <= k; i++) print order[i] "," n[order[i]] }' /app/worker.log > /app/errors_per_hour.csv
