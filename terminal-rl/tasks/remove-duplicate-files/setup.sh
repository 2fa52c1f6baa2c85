#!/bin/bash
set -euo pipefail
mkdir -p /app/data
python3 - <<'PY'
contents = {
    "a": b"alpha release notes\n", "b": b"beta release notes\n", "c": b"".join(bytes([i % 251]) for i in range(3000)),
    "d": b"", "e": b"config: 1\n", "f": b"config: 1\n\n",
}
files = {
    "notes_v1.txt": "a", "copy of notes_v1.txt": "a", "notes_final.txt": "a",
    "beta.txt": "b", "blob.bin": "c", "blob (1).bin": "c", "zz_blob.bin": "c",
    "empty.log": "d", "zero.log": "d", "settings.cfg": "e", "settings-old.cfg": "f", "settings.cfg.bak": "e",
}
for name, key in files.items():
    with open(f"/app/data/{name}", "wb") as f:
        f.write(contents[key])
PY
