#!/bin/bash
for f in /app/docs/*.md; do
  sed -i -e 's/\r$//' -e 's/[[:space:]]*$//' "$f"
done
