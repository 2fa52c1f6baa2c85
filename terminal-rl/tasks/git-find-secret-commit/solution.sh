#!/bin/bash
cd /app/repo
c=$(git log --reverse --format=%H -S AWS_SECRET_ACCESS_KEY | head -n 1)
echo "$c" > /app/answer.txt
git show --format= --name-only "$c" | head -n 1 > /app/file.txt
