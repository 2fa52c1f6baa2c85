#!/bin/bash
set -euo pipefail
mkdir -p /app/etc/nginx/sites /app/etc/app /app/etc/empty /app/etc/ssl
printf 'worker_processes 2;\n' > /app/etc/nginx/nginx.conf
printf 'server { listen 80; }\n' > /app/etc/nginx/sites/default.conf
printf 'server { listen 8080; }\n' > '/app/etc/nginx/sites/my site.conf'
printf 'old\n' > /app/etc/nginx/sites/default.conf.orig
printf 'debug=false\n' > /app/etc/app/app.conf
printf 'KEY\n' > /app/etc/ssl/server.key
printf 'hosts\n' > /app/etc/hosts
printf 'top=1\n' > /app/etc/main.conf
