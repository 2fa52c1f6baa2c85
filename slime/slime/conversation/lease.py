"""The store's trainer lease, held by whatever consumes its samples (a trainer, or `collect` writing a rollout
directory): one consumer at a time, so no sample is handed out twice."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid

from slime.conversation import store_backends

log = logging.getLogger("slime.conversation")


class TrainerLease:
    """This trainer's claim on the store: taken at start (or refused with who holds it), renewed by a daemon
    thread every TTL/4, given back at close. Claims and "trained" marks check it in their own transaction, so
    two trainers attached to one store never train a sample twice."""

    def __init__(self, store, ttl: float, role: str = "trainer"):
        if ttl <= 0:
            raise ValueError(f"--trainer-lease-ttl must be > 0, got {ttl}")
        self.store, self.ttl = store, ttl
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.owner = f"{role}:{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _holder_is_gone(self, holder: dict) -> bool:
        """A holder on this host whose process no longer exists (a restart after a crash need not wait)."""
        if holder["host"] != self.host:
            return False
        try:
            os.kill(int(holder["pid"]), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def acquire(self) -> None:
        holder = self.store.acquire_trainer_lease(self.owner, self.host, self.pid, self.ttl, self._holder_is_gone)
        if holder is not None:
            age = time.time() - holder["heartbeat"]
            raise RuntimeError(
                f"another trainer (or collector) is attached to the store {store_backends.describe(self.store.path)}: "
                f"{holder['owner']} (host {holder['host']}, pid {holder['pid']}), last seen {age:.0f} s ago. "
                "Two trainers would train the same samples: stop that one first, or, if it died on another "
                f"host, wait until its lease expires ({self.ttl:.0f} s after its last renewal, "
                "--trainer-lease-ttl)")
        log.info("trainer lease %s taken on %s", self.owner, store_backends.describe(self.store.path))
        self._thread = threading.Thread(target=self._renew_forever, name="trainer-lease", daemon=True)
        self._thread.start()

    def _renew_forever(self) -> None:
        while not self._stop.wait(self.ttl / 4):
            try:
                if not self.store.renew_trainer_lease(self.owner):
                    log.error("trainer lease %s was taken by another trainer; this one can no longer claim "
                              "or mark samples", self.owner)
                    return
            except Exception:  # a store hiccup: try again at the next beat, the TTL leaves room for several
                log.exception("could not renew the trainer lease")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            try:
                self.store.release_trainer_lease(self.owner)
            except Exception:
                log.exception("could not release the trainer lease (it expires by itself)")
