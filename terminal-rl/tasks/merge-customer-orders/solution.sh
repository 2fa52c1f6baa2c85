#!/bin/bash
python3 - <<'PY'
import csv
from decimal import Decimal
customers = list(csv.DictReader(open("/app/customers.csv", newline="")))
count, total = {}, {}
for o in csv.DictReader(open("/app/orders.csv", newline="")):
    count[o["customer_id"]] = count.get(o["customer_id"], 0) + 1
    total[o["customer_id"]] = total.get(o["customer_id"], Decimal(0)) + Decimal(o["amount"])
rows = [(c["name"], c["country"], count.get(c["id"], 0), total.get(c["id"], Decimal(0))) for c in customers]
rows.sort(key=lambda r: r[3], reverse=True)
with open("/app/report.csv", "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["name", "country", "orders", "total"])
    for name, country, n, t in rows:
        w.writerow([name, country, n, f"{t:.2f}"])
PY
