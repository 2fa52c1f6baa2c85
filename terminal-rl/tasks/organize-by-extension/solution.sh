#!/bin/bash
cd /app/inbox
for f in *; do
  [ -f "$f" ] || continue
  case "$f" in
    *.*) ext="${f##*.}"; ext="${ext,,}" ;;
    *) ext=other ;;
  esac
  mkdir -p "/app/sorted/$ext"
  mv -- "$f" "/app/sorted/$ext/"
done
