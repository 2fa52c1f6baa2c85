#!/bin/bash
set -euo pipefail
mkdir -p /app/logs
python3 - <<'PY'
import gzip
chunks = {3: [], 2: [], 1: [], 0: []}
t = 0
for gen in (3, 2, 1, 0):
    for i in range(12 + gen):
        t += 7 + (i * 5) % 11
        h, rem = divmod(t, 3600)
        m, s = divmod(rem, 60)
        chunks[gen].append(f"2024-06-0{4 - gen} {10 + h:02d}:{m:02d}:{s:02d} gen{gen} event {i}\n")
for gen, lines in chunks.items():
    data = "".join(lines).encode()
    if gen == 0:
        open("/app/logs/app.log", "wb").write(data)
    elif gen == 1:
        open("/app/logs/app.log.1", "wb").write(data)
    else:
        with open(f"/app/logs/app.log.{gen}.gz", "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
                f.write(data)
PY
