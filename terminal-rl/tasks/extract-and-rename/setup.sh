#!/bin/bash
set -euo pipefail
work=$(mktemp -d)
mkdir -p "$work/bundle/docs/api" "$work/bundle/data"
printf 'Welcome\n' > "$work/bundle/README.txt"
printf 'Install with make\n' > "$work/bundle/docs/install.txt"
printf 'GET /items\n' > "$work/bundle/docs/api/endpoints.txt"
printf 'release notes v2\n' > "$work/bundle/docs/release notes.txt"
printf '1,2,3\n' > "$work/bundle/data/values.csv"
printf 'not a text file\n' > "$work/bundle/data/config.txt.bak"
tar -C "$work" --sort=name --owner=0 --group=0 --mtime='2024-01-01 00:00:00' -czf /app/bundle.tar.gz bundle
rm -rf "$work"
