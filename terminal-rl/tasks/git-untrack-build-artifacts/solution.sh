#!/bin/bash
cd /app/repo
printf 'build/\n*.pyc\n' > .gitignore
git rm -r -q --cached build
git ls-files -z '*.pyc' | xargs -0 -r git rm -q --cached --
git add .gitignore
git commit -q -m "Stop tracking build artifacts"
