#!/bin/bash
set -euo pipefail
cat > /app/users.json <<'JSON'
[
  {"name": "Priya", "age": 34, "active": true, "roles": ["admin"]},
  {"name": "Tom", "age": 29, "active": true, "roles": []},
  {"name": "Aiko", "age": 30, "active": true, "roles": ["dev"]},
  {"name": "Bruno", "age": 45, "active": false, "roles": ["dev", "ops"]},
  {"name": "Zara", "age": 51, "active": true, "roles": ["finance"]},
  {"name": "Carlos", "age": 30, "active": false, "roles": []},
  {"name": "Mei", "age": 38, "active": true, "roles": ["ops"]},
  {"name": "Liam", "age": 17, "active": true, "roles": ["intern"]},
  {"name": "Olga", "age": 62, "active": true, "roles": []}
]
JSON
