#!/bin/bash
python3 - <<'PY'
import json, re
from collections import Counter
counts, errors = Counter(), set()
for line in open("/app/access.log"):
    m = re.search(r'"(\S+) (\S+) [^"]*" (\d{3}) ', line)
    counts[m.group(3)] += 1
    if m.group(3).startswith("5"):
        errors.add(m.group(2).split("?")[0])
json.dump(dict(counts), open("/app/status_counts.json", "w"), indent=2)
open("/app/server_errors.txt", "w").write("".join(p + "\n" for p in sorted(errors)))
PY
