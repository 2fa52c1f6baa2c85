#!/bin/bash
set -euo pipefail
python3 - <<'PY'
levels = ["INFO", "INFO", "DEBUG", "WARN", "INFO", "ERROR", "INFO", "DEBUG"]
messages = [
    "request handled in {n} ms",
    "cache refreshed ({n} keys)",
    "no error found while checking shard {n}",
    "retrying upstream call, attempt {n}",
    "ERROR budget at {n} percent",
    "connection reset by peer (worker {n})",
    "user {n} logged in",
]
with open("/app/app.log", "w") as f:
    for i in range(240):
        level = levels[(i * 5 + i // 7) % len(levels)]
        minute, second = divmod(i * 13, 60)
        msg = messages[(i * 3) % len(messages)].format(n=i)
        f.write(f"2024-03-01 09:{minute % 60:02d}:{second:02d} [{level}] {msg}\n")
PY
