#!/bin/bash
cd /app/srv
find . -type f -perm -o=w -printf '%P\n' | LC_ALL=C sort > /app/world_writable.txt
while IFS= read -r f; do chmod o-w -- "$f"; done < /app/world_writable.txt
