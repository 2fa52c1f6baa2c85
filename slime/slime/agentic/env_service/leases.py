"""Lease records on disk, so that a pool server that was killed and restarted knows what it had handed out.

A restarted server cannot resume its leases (their shell sessions and processes died with it), so at start it
closes every lease the file still shows open: the provider reaps what the record names (a sandbox uid's leftover
processes) and the lease's work directory is removed. Clients holding such a lease get 404 and start a new episode.
One SQLite file (WAL) per pool server; writes are a few per episode, off the event loop.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass, field

SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    lease_id TEXT PRIMARY KEY,
    task_key TEXT NOT NULL,
    request_id TEXT,
    created REAL NOT NULL,
    closed REAL,
    close_reason TEXT,
    resources TEXT NOT NULL DEFAULT '{}',
    reap_attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS leases_open ON leases (closed);
"""


@dataclass
class LeaseRecord:
    lease_id: str
    task_key: str
    request_id: str | None
    created: float
    closed: float | None = None
    close_reason: str | None = None
    resources: dict = field(default_factory=dict)
    reap_attempts: int = 0  # failed reaps at start so far (the record stays open until one works, or too many fail)


class LeaseStore:
    """The `leases` table of `<state_dir>/leases.db`: thread-safe, one connection."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(leases)")}
        if "reap_attempts" not in columns:  # a file written before the column existed
            self._db.execute("ALTER TABLE leases ADD COLUMN reap_attempts INTEGER NOT NULL DEFAULT 0")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def opened(self, lease_id: str, task_key: str, request_id: str | None) -> None:
        with self._lock:
            self._db.execute("INSERT INTO leases (lease_id, task_key, request_id, created) VALUES (?, ?, ?, ?)",
                             (lease_id, task_key, request_id, time.time()))

    def set_resources(self, lease_id: str, resources: dict) -> None:
        with self._lock:
            self._db.execute("UPDATE leases SET resources = ? WHERE lease_id = ?", (json.dumps(resources), lease_id))

    def closed(self, lease_id: str, reason: str) -> None:
        with self._lock:
            self._db.execute("UPDATE leases SET closed = ?, close_reason = ? WHERE lease_id = ? AND closed IS NULL",
                             (time.time(), reason, lease_id))

    def reap_failed(self, lease_id: str) -> int:
        """Count one more failed reap of the open record `lease_id`; the count so far."""
        with self._lock:
            self._db.execute("UPDATE leases SET reap_attempts = reap_attempts + 1 WHERE lease_id = ?", (lease_id,))
            row = self._db.execute("SELECT reap_attempts FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
        return int(row[0]) if row else 0

    def open_records(self) -> list[LeaseRecord]:
        with self._lock:
            rows = self._db.execute("SELECT lease_id, task_key, request_id, created, closed, close_reason, resources, "
                                    "reap_attempts FROM leases WHERE closed IS NULL ORDER BY created").fetchall()
        return [LeaseRecord(*row[:6], resources=json.loads(row[6] or "{}"), reap_attempts=row[7]) for row in rows]

    def get(self, lease_id: str) -> LeaseRecord | None:
        with self._lock:
            row = self._db.execute("SELECT lease_id, task_key, request_id, created, closed, close_reason, resources, "
                                   "reap_attempts FROM leases WHERE lease_id = ?", (lease_id,)).fetchone()
        return LeaseRecord(*row[:6], resources=json.loads(row[6] or "{}"), reap_attempts=row[7]) if row else None

    def counts(self) -> dict:
        with self._lock:
            total, open_ = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(closed IS NULL), 0) FROM leases").fetchone()
        return {"recorded": total, "open": open_}
