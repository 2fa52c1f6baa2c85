#!/bin/bash
set -euo pipefail
python3 - <<'PY'
events = [
    ("203.0.113.50", "root", False, False), ("203.0.113.50", "admin", False, True), ("10.1.1.4", "alice", True, False),
    ("198.51.100.9", "oracle", False, True), ("203.0.113.50", "root", False, False), ("198.51.100.9", "test", False, True),
    ("10.1.1.4", "alice", False, False), ("203.0.113.50", "ubuntu", False, True), ("192.0.2.77", "bob", False, False),
    ("198.51.100.9", "oracle", False, True), ("10.1.1.4", "alice", True, False), ("203.0.113.50", "root", False, False),
    ("192.0.2.77", "bob", True, False), ("10.1.1.4", "alice", False, False), ("198.51.100.9", "postgres", False, True),
    ("203.0.113.50", "git", False, True), ("192.0.2.77", "bob", False, False), ("10.1.1.4", "carol", True, False),
]
with open("/app/auth.log", "w") as f:
    for i, (ip, user, ok, invalid) in enumerate(events):
        ts = f"Mar  3 04:{10 + i // 4:02d}:{(i * 17) % 60:02d}"
        pid = 2100 + i * 3
        if ok:
            f.write(f"{ts} web1 sshd[{pid}]: Accepted password for {user} from {ip} port {40000 + i} ssh2\n")
        else:
            who = f"invalid user {user}" if invalid else user
            f.write(f"{ts} web1 sshd[{pid}]: Failed password for {who} from {ip} port {40000 + i} ssh2\n")
        if i % 5 == 0:
            f.write(f"{ts} web1 CRON[{pid + 1}]: pam_unix(cron:session): session opened for user root by (uid=0)\n")
PY
