#!/bin/bash
set -euo pipefail
python3 - <<'PY'
ips = ["10.0.0.5", "10.0.0.17", "192.168.1.20", "172.16.4.2", "10.0.0.9", "203.0.113.7", "198.51.100.23", "192.168.1.3"]
weights = [9, 5, 14, 3, 7, 1, 11, 2]
paths = ["/", "/login", "/api/items", "/api/items?page=2", "/api/orders", "/static/app.js", "/api/orders?id=7", "/health"]
statuses = [200, 200, 200, 304, 200, 404, 500, 200, 201, 502, 200, 401]
pool = [ip for ip, w in zip(ips, weights) for _ in range(w)]
with open("/app/access.log", "w") as f:
    for i in range(400):
        ip = pool[(i * 29 + i // 13) % len(pool)]
        path = paths[(i * 5 + i // 7) % len(paths)]
        method = "POST" if path in ("/login", "/api/orders") and i % 3 == 0 else "GET"
        status = statuses[(i * 7 + i // 11) % len(statuses)]
        if status >= 500 and path not in ("/api/orders?id=7", "/login"):
            status = 200
        size = (i * 337) % 5000 + 120
        ms = (i * 53) % 400 + 5 + (300 if path.startswith("/api/orders") else 0)
        hh, rem = divmod(i * 37, 3600)
        mm, ss = divmod(rem, 60)
        f.write(f'{ip} - - [12/Mar/2024:{8 + hh:02d}:{mm:02d}:{ss:02d} +0000] "{method} {path} HTTP/1.1" {status} {size} "-" "curl/8.0" {ms}ms\n')
PY
