#!/bin/bash
set -euo pipefail
mkdir -p /app/photos
cd /app/photos
i=0
for name in "Summer Trip - Day 1.JPG" "Summer Trip - Day 2.JPG" "Beach__Party.jpeg" "Mom's Birthday.PNG" \
            "IMG 0031.jpg" "family-dinner   2023.Png" "already_fine.jpg"; do
  i=$((i + 1))
  printf 'photo %d: %s\n' "$i" "$name" > "$name"
done
