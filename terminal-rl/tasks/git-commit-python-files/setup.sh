#!/bin/bash
set -euo pipefail
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
n=0
commit() {  # commit MESSAGE: a commit with a fixed, increasing date (same hashes on every setup)
  n=$((n + 1))
  GIT_AUTHOR_DATE="2024-02-01T10:$(printf '%02d' $n):00Z" GIT_COMMITTER_DATE="2024-02-01T10:$(printf '%02d' $n):00Z" \
    git commit -q -m "$1"
}
mkdir -p /app/repo && cd /app/repo
git init -q -b main
git config user.name "Dana Dev"
git config user.email "dana@example.com"
mkdir -p app
printf 'def main():\n    print("hello")\n' > app/main.py
printf 'VERSION = "0.1"\n' > app/version.py
printf 'todo: parser\n' > notes.txt
git add -A && commit "Initial commit"
printf 'def main():\n    from app.parser import parse\n    print(parse("a,b"))\n' > app/main.py
printf 'def parse(line):\n    return line.split(",")\n' > app/parser.py
printf 'def test_parse():\n    pass\n' > test_parser.py
printf 'todo: parser (in progress)\n' > notes.txt
printf 'debug output\n' > scratch.log
