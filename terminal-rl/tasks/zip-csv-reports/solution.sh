#!/bin/bash
python3 - <<'PY'
import pathlib, zipfile
with zipfile.ZipFile("/app/reports.zip", "w", zipfile.ZIP_DEFLATED) as z:
    for p in sorted(pathlib.Path("/app/reports").rglob("*.csv")):
        z.write(p, arcname=p.name)
PY
