#!/bin/bash
python3 - <<'PY'
import json
from collections import Counter
events, invalid = [], 0
for line in open("/app/events.jsonl"):
    if not line.strip():
        continue
    try:
        events.append(json.loads(line))
    except json.JSONDecodeError:
        invalid += 1
summary = {
    "total_events": len(events),
    "invalid_lines": invalid,
    "unique_users": len({e["user"] for e in events}),
    "by_type": dict(Counter(e["type"] for e in events)),
}
json.dump(summary, open("/app/summary.json", "w"), indent=2)
PY
