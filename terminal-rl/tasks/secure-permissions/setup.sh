#!/bin/bash
set -euo pipefail
mkdir -p /app/server/secrets /app/server/public/css /app/server/bin
printf 'PRIVATE KEY\n' > /app/server/secrets/tls.key
printf 'db_password=hunter2\n' > /app/server/secrets/db.env
printf '<h1>hi</h1>\n' > /app/server/public/index.html
printf 'h1{}\n' > /app/server/public/css/site.css
printf '#!/bin/sh\necho start\n' > /app/server/bin/start.sh
printf '#!/bin/sh\necho stop\n' > /app/server/bin/stop.sh
chmod 777 /app/server/secrets
chmod 666 /app/server/secrets/tls.key
chmod 644 /app/server/secrets/db.env
chmod 777 /app/server/public/index.html
chmod 600 /app/server/public/css/site.css
chmod 644 /app/server/bin/start.sh
chmod 700 /app/server/bin/stop.sh
