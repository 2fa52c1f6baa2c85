#!/bin/bash
python3 - <<'PY'
import csv, json
with open("/app/employees.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for r in rows:
    r["id"] = int(r["id"])
    r["salary"] = int(r["salary"])
with open("/app/employees.json", "w") as f:
    json.dump(rows, f, indent=2)
PY
