#!/bin/bash
set -euo pipefail
mkdir -p /app/docs
printf '# Install  \r\n\r\nRun the installer.\t\r\n   Indented line stays indented.   \r\n\r\n' > /app/docs/install.md
printf 'Usage\r\n=====  \r\n\r\n* start \r\n* stop\t \r\n' > /app/docs/usage.md
printf 'Changelog\r\n\r\n  - 1.0: first release  \r\n' > /app/docs/CHANGES.md
printf 'keep me as I am  \r\n' > /app/docs/notes.txt
