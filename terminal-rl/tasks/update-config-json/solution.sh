#!/bin/bash
python3 - <<'PY'
import json
cfg = json.load(open("/app/config.json"))
cfg["server"]["port"] = 8080
cfg["server"]["max_connections"] = 200
cfg["logging"]["level"] = "debug"
cfg.pop("legacy_mode", None)
json.dump(cfg, open("/app/config.json", "w"), indent=2)
PY
