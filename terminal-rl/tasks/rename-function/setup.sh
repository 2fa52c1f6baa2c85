#!/bin/bash
set -euo pipefail
mkdir -p /app/src
cat > /app/src/config.py <<'PY'
"""Configuration loading."""


def load_cfg(path):
    """Read KEY=VALUE lines."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition("=")
                out[key.strip()] = value.strip()
    return out


def load_cfg_legacy(path):
    """The old format: KEY VALUE separated by a space."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
    return out
PY
cat > /app/src/main.py <<'PY'
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from config import load_cfg, load_cfg_legacy  # noqa: E402
from report import summary  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
cfg = load_cfg(os.path.join(HERE, "app.cfg"))
old = load_cfg_legacy(os.path.join(HERE, "old.cfg"))
print(summary(cfg, old))
PY
cat > /app/src/report.py <<'PY'
from config import load_cfg


def summary(cfg, old):
    # load_cfg is re-read here so the report always shows the file's current values
    defaults = load_cfg(__file__.replace("report.py", "defaults.cfg"))
    merged = {**defaults, **old, **cfg}
    return ", ".join(f"{k}={merged[k]}" for k in sorted(merged))
PY
printf 'name = demo\nport = 8000\n# comment\n' > /app/src/app.cfg
printf 'mode fast\nport 7000\n' > /app/src/old.cfg
printf 'debug = false\nport = 1\n' > /app/src/defaults.cfg
