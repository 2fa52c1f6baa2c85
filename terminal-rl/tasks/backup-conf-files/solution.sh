#!/bin/bash
mkdir -p /app/backup
cd /app/etc
find . -type f -name '*.conf' -exec cp --parents {} /app/backup/ \;
