#!/bin/bash
cd /app
grep 'Failed password' auth.log | sed -E 's/.* from ([0-9.]+) port.*/\1/' | sort | uniq -c \
  | awk '$1 >= 3 {print $1, $2}' | sort -k1,1nr -k2,2 | awk '{print $2}' > blocklist.txt
grep 'Failed password' auth.log | grep -F -w -f blocklist.txt \
  | sed -E 's/.*Failed password for (invalid user )?([^ ]+) from.*/\2/' | sort -u > targeted_users.txt
