#!/bin/bash
set -euo pipefail
mkdir -p /app/inbox
cd /app/inbox
printf '%%PDF-1.4 quarterly report\n' > report.PDF
printf 'buy milk\n' > notes.txt
printf 'meeting notes\n' > 'meeting notes.txt'
printf 'JPEGDATA1' > photo.jpg
printf 'JPEGDATA2' > IMG_0042.JPG
printf 'tarball' > backup.tar.gz
printf 'read me first\n' > README
printf 'a,b\n1,2\n' > data.csv
printf 'echo hi\n' > install.sh
printf 'no extension either\n' > Makefile
