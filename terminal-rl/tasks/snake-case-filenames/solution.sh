#!/bin/bash
cd /app/photos
for f in *; do
  new=$(printf '%s' "$f" | tr 'A-Z' 'a-z' | sed -E 's/[ _-]+/_/g')
  [ "$f" = "$new" ] || mv -- "$f" "$new"
done
