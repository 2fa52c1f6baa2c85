#!/bin/bash
set -euo pipefail
mkdir -p /app/srv/www /app/srv/data/cache /app/srv/scripts
declare -A modes=(
  [www/index.html]=646 [www/about.html]=644 [data/users.db]=666 [data/cache/tmp1]=777
  [data/cache/tmp2]=602 [scripts/backup.sh]=757 [scripts/run.sh]=775 [README]=664
)
for f in "${!modes[@]}"; do
  printf 'content of %s\n' "$f" > "/app/srv/$f"
  chmod "${modes[$f]}" "/app/srv/$f"
done
