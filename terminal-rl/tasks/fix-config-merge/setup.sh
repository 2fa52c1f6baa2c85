#!/bin/bash
set -euo pipefail
cat > /app/merge_config.py <<'PY'
import json
import sys


def merge(base, override):
    result = dict(base)
    for key, value in override.items():
        result[key] = value
    return result


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        base = json.load(f)
    with open(sys.argv[2]) as f:
        override = json.load(f)
    print(json.dumps(merge(base, override), indent=2, sort_keys=True))
PY
printf '{"db": {"host": "localhost", "port": 5432}, "debug": false}\n' > /app/base.json
printf '{"db": {"port": 6543}, "debug": true}\n' > /app/override.json
