#!/bin/bash
awk '{print $1}' /app/access.log | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 5 | awk '{print $2, $1}' > /app/top_ips.txt
