#!/bin/bash
mkdir -p /app/extracted
tar -xzf /app/bundle.tar.gz -C /app/extracted
find /app/extracted -type f -name '*.txt' | while IFS= read -r f; do mv -- "$f" "${f%.txt}.md"; done
