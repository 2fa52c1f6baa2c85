#!/bin/bash
set -euo pipefail
cat > /app/config.json <<'JSON'
{
  "name": "billing-api",
  "legacy_mode": true,
  "server": {"host": "0.0.0.0", "port": 5000, "workers": 4},
  "logging": {"level": "info", "file": "/var/log/billing.log", "rotate": {"days": 7}},
  "features": ["invoices", "refunds"],
  "database": {"url": "postgres://db:5432/billing", "pool": 10}
}
JSON
