#!/bin/bash
awk -F, 'NR==1 {for (i=2; i<=NF; i++) name[i]=$i; n=NF; next}
         {for (i=2; i<=NF; i++) s[i]+=$i}
         END {print "column,sum"; for (i=2; i<=n; i++) print name[i] "," s[i]}' /app/sales.csv > /app/sums.csv
