#!/bin/bash
cd /app/project
find . -type f -size +10000c -printf '%s %P\n' | sort -k1,1nr > /app/large_files.txt
