#!/bin/bash
cd /app/repo
c=$(git log --format=%H --grep='^Bump version to 1\.2\.0$')
git tag -a v1.2.0 -m "Release 1.2.0" "$c"
git branch release-1.2 "$c"
