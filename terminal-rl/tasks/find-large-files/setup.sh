#!/bin/bash
set -euo pipefail
python3 - <<'PY'
import os
sizes = {
    "README.md": 900, "src/main.c": 14250, "src/util.c": 9999, "src/vendor/big_table.h": 120003,
    "assets/logo.png": 48211, "assets/icons/small.png": 10000, "assets/icons/medium.png": 10001,
    "build/output.bin": 250880, "build/.cache/index": 31337, "docs/manual.pdf": 77777, "docs/notes.txt": 512,
}
for rel, size in sizes.items():
    path = os.path.join("/app/project", rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(bytes((i * 31 + len(rel)) % 256 for i in range(size)))
os.symlink("../build/output.bin", "/app/project/docs/output-link.bin")
PY
