#!/bin/bash
python3 -c '
import json
users = json.load(open("/app/users.json"))
names = sorted(u["name"] for u in users if u["active"] and u["age"] >= 30)
open("/app/names.txt", "w").write("".join(n + "\n" for n in names))
'
