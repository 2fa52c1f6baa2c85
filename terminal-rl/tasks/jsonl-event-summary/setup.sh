#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import json
types = ["click", "view", "purchase", "view", "click", "signup", "view"]
with open("/app/events.jsonl", "w") as f:
    for i in range(150):
        if i % 23 == 7:
            f.write('{"ts": %d, "type": "view", "user": ' % i + "\n")  # truncated line
            continue
        if i % 31 == 11:
            f.write("<<binary junk %d>>\n" % i)
            continue
        if i % 50 == 49:
            f.write("\n")  # an empty line is neither an event nor corrupted
            continue
        event = {"ts": 1700000000 + i * 17, "type": types[(i * 3 + i // 10) % len(types)], "user": f"u{(i * 13) % 37:02d}"}
        f.write(json.dumps(event) + "\n")
PY
