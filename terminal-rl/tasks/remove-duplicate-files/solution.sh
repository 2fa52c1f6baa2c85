#!/bin/bash
cd /app/data
: > /app/removed.tmp
declare -A seen
while IFS= read -r name; do
  sum=$(md5sum < "$name" | cut -d' ' -f1)
  if [ -n "${seen[$sum]:-}" ]; then
    printf '%s\n' "$name" >> /app/removed.tmp
    rm -- "$name"
  else
    seen[$sum]=1
  fi
done < <(LC_ALL=C ls -1 | sort)
LC_ALL=C sort /app/removed.tmp > /app/removed.txt
rm /app/removed.tmp
