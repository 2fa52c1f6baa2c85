#!/bin/bash
set -euo pipefail
mkdir -p /app/site/css /app/site/img /app/site/cache/pages /app/site/blog/2024
printf '<h1>Home</h1>\n' > /app/site/index.html
printf 'body { color: #333; }\n' > /app/site/css/main.css
printf 'PNGDATA' > /app/site/img/logo.png
printf '<p>first post</p>\n' > /app/site/blog/2024/first-post.html
printf 'GET / 200\n' > /app/site/access.log
printf 'debug\n' > /app/site/blog/debug.log
printf 'cached\n' > /app/site/cache/pages/index.html
printf 'tmp\n' > /app/site/cache/stale.tmp
printf 'Changelog: see CHANGELOG.log.txt\n' > /app/site/CHANGELOG.log.txt
