#!/bin/bash
set -euo pipefail
python3 - <<'PY'
levels = ["INFO", "INFO", "ERROR", "INFO", "WARN", "INFO", "ERROR", "INFO", "INFO", "DEBUG"]
with open("/app/worker.log", "w") as f:
    t = 22 * 3600 + 40 * 60  # 22:40 on May 1st, crossing midnight
    for i in range(180):
        t += (i * 53) % 170 + 20
        day, rem = divmod(t, 86400)
        hh, rem = divmod(rem, 3600)
        mm, ss = divmod(rem, 60)
        level = levels[(i * 7 + i // 5) % len(levels)]
        if 23 * 3600 <= t < 24 * 3600 and level == "ERROR":
            level = "WARN"  # a quiet hour
        msg = f"job {i} failed" if level == "ERROR" else f"job {i} ok (no ERROR)"
        f.write(f"2024-05-{1 + day:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z {level} {msg}\n")
PY
