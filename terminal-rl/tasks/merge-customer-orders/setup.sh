#!/bin/bash
set -euo pipefail
cat > /app/customers.csv <<'CSV'
id,name,country
1,Acme Corp,US
2,Birch & Sons,UK
3,Cobalt GmbH,DE
4,Delta Foods,US
5,Echo Labs,FR
6,Fjord AS,NO
CSV
python3 - <<'PY'
with open("/app/orders.csv", "w") as f:
    f.write("order_id,customer_id,amount\n")
    for i in range(1, 41):
        cust = [1, 2, 3, 4, 5][(i * 7) % 5]
        if cust == 5 and i % 2 == 0:
            cust = 3
        cents = (i * 7919) % 20000 + 500
        f.write(f"{1000 + i},{cust},{cents // 100}.{cents % 100:02d}\n")
PY
