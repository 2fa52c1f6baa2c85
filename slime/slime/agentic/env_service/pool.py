"""The lease pool of one pool server: capacity, idempotent allocate, per-lease serialisation, the idle reaper and the
lease records on disk. The environment behind a lease is the provider's (`providers.py`).

Capacity follows upstream: at most `max_tasks` distinct task keys with live leases, each with at most
`max_runs_per_task` leases; beyond that `allocate` raises `PoolError(429, TASK_SLOTS_EXHAUSTED |
RUN_SLOTS_EXHAUSTED)`. A lease's slot is freed as soon as it is closed (by the client, the reaper or shutdown);
the environment is torn down in the background, at most `max_concurrent_closes` at a time, and counted as a
pending close until it is gone. Calls for one lease run one at a time (a per-lease lock); the pool's own lock
guards only its maps and is never held across a provider call.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from slime.agentic import fs_tree
from slime.agentic.env_service.leases import LeaseStore
from slime.agentic.env_service.providers import (
    EnvProvider,
    LeaseContext,
    ProviderError,
    ReapDeferred,
)
from slime.agentic.env_service.settings import PoolSettings

logger = logging.getLogger(__name__)

# a lease record whose reap at start failed this many starts (not counting ones deferred because its daemon did not
# answer) is closed with an error in the log: a permanent failure is not retried forever
MAX_REAP_ATTEMPTS = 5


class PoolError(Exception):
    """An answer other than success: HTTP status, machine-readable code, human-readable message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def new_lease_id() -> str:
    return "run-" + secrets.token_hex(8)


@dataclass
class Lease:
    lease_id: str
    task_key: str
    request_id: str | None
    created: float
    last_used: float
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    env: Any = None  # the provider's environment, after the first reset
    closed: bool = False
    calls: int = 0

    def touch(self) -> None:
        self.last_used = time.monotonic()


class LeasePool:
    def __init__(self, settings: PoolSettings, provider: EnvProvider):
        self.settings = settings
        self.provider = provider
        self.leases: dict[str, Lease] = {}
        self.by_task: dict[str, set[str]] = {}
        self.idempotency: dict[tuple[str, str], tuple[str, float]] = {}
        # absolute: the sandboxes bind their work directories by path (bwrap refuses a relative source path)
        self.lease_root = os.path.abspath(os.path.join(settings.state_dir, "leases"))
        self.store = LeaseStore(os.path.join(settings.state_dir, "leases.db"))
        self._lock = asyncio.Lock()
        self._closes = asyncio.Semaphore(settings.max_concurrent_closes)
        self._pending: set[asyncio.Task] = set()
        self._reaper: asyncio.Task | None = None
        self._state_lock_fd: int | None = None
        self.counters = {"allocated": 0, "reused": 0, "rejected": 0, "closed": 0, "reaped_idle": 0,
                         "reaped_at_start": 0, "reap_errors": 0, "reap_abandoned": 0, "close_errors": 0}

    # -------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Take the state directory (one live server per directory), reap what a previous run of this server left
        (records still open, lease directories), then start the idle reaper."""
        self._claim_state_dir()
        await asyncio.to_thread(self._reap_previous_run)
        self._reaper = asyncio.create_task(self._reap_loop())

    def _claim_state_dir(self) -> None:
        """An exclusive flock on `<state_dir>/server.lock`, held while the server lives (the kernel drops it when
        the process dies): a second server on the same directory would otherwise reap the first one's live leases."""
        os.makedirs(self.settings.state_dir, exist_ok=True)
        fd = os.open(os.path.join(self.settings.state_dir, "server.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(f"another pool server is using the state directory {self.settings.state_dir} "
                               "(one server per state directory)") from None
        self._state_lock_fd = fd

    def _reap_previous_run(self) -> None:
        for record in self.store.open_records():
            try:
                # the lease id too: a provider may find what a reset cut short left before it was recorded
                self.provider.reap({**record.resources, "lease_id": record.lease_id})
            except ReapDeferred as e:  # it could not even try (its daemon does not answer): no attempt counted
                logger.warning("env pool: lease %s (%s) not reaped, kept open for the next start: %s",
                               record.lease_id, record.resources, e)
                self.counters["reap_errors"] += 1
                continue
            except Exception as e:  # a record we cannot act on must not stop the server from starting
                # ... but it stays open: what it names may still be there, and the next start tries again, up to
                # MAX_REAP_ATTEMPTS starts (a permanent failure is not retried forever)
                self.counters["reap_errors"] += 1
                attempts = self.store.reap_failed(record.lease_id)
                if attempts < MAX_REAP_ATTEMPTS:
                    logger.warning("env pool: reaping lease %s (%s) failed (attempt %d of %d), kept open for the "
                                   "next start: %s", record.lease_id, record.resources, attempts, MAX_REAP_ATTEMPTS, e)
                    continue
                logger.error("env pool: reaping lease %s (%s) failed %d times, closing its record; what it names "
                             "may be left behind: %s", record.lease_id, record.resources, attempts, e)
                self.store.closed(record.lease_id, f"reap failed {attempts} times: {e}"[:1000])
                self.counters["reap_abandoned"] += 1
                continue
            self.store.closed(record.lease_id, "reaped at start (server restarted)")
            self.counters["reaped_at_start"] += 1
        if os.path.isdir(self.lease_root):
            for name in os.listdir(self.lease_root):  # also directories whose record was never written
                fs_tree.remove_tree(os.path.join(self.lease_root, name))
        os.makedirs(self.lease_root, exist_ok=True)
        if self.counters["reaped_at_start"]:
            logger.info("env pool: reaped %d lease(s) left open by a previous run", self.counters["reaped_at_start"])

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        async with self._lock:
            leases = [self._detach(lease_id) for lease_id in list(self.leases)]
        await asyncio.gather(*(self._teardown(lease, "server shutdown") for lease in leases if lease),
                             return_exceptions=True)
        await asyncio.gather(*self._pending, return_exceptions=True)
        await asyncio.to_thread(self.store.close)
        if self._state_lock_fd is not None:
            os.close(self._state_lock_fd)
            self._state_lock_fd = None

    # -------------------------------------------------------------------------------- allocate / close

    async def allocate(self, task_key: str, request_id: str | None = None) -> tuple[str, bool]:
        """(lease_id, reused). The same (task_key, request_id) within the idempotency window gets the same live
        lease back, so a client may retry an allocate whose answer it lost."""
        if not isinstance(task_key, str) or not task_key.strip():
            raise PoolError(400, "BAD_REQUEST", "task_key must be a non-empty string")
        if request_id is not None and not isinstance(request_id, str):
            raise PoolError(400, "BAD_REQUEST", "request_id must be a string")
        await self.reap_idle()
        now = time.monotonic()
        async with self._lock:
            self._expire_idempotency(now)
            if request_id:
                known = self.idempotency.get((task_key, request_id))
                if known and known[0] in self.leases:
                    self.leases[known[0]].touch()
                    self.counters["reused"] += 1
                    return known[0], True
            runs = self.by_task.get(task_key)
            if not runs and len(self.by_task) >= self.settings.max_tasks:
                self.counters["rejected"] += 1
                raise PoolError(429, "TASK_SLOTS_EXHAUSTED",
                                f"all {self.settings.max_tasks} task slots are in use; retry later")
            if runs and len(runs) >= self.settings.max_runs_per_task:
                self.counters["rejected"] += 1
                raise PoolError(429, "RUN_SLOTS_EXHAUSTED",
                                f"task {task_key!r} has all {self.settings.max_runs_per_task} run slots in use; "
                                "retry later")
            lease = Lease(new_lease_id(), task_key, request_id, time.time(), now)
            self.leases[lease.lease_id] = lease
            self.by_task.setdefault(task_key, set()).add(lease.lease_id)
            if request_id:
                self.idempotency[(task_key, request_id)] = (lease.lease_id, now)
            self.counters["allocated"] += 1
        await asyncio.to_thread(self.store.opened, lease.lease_id, task_key, request_id)
        return lease.lease_id, False

    def _expire_idempotency(self, now: float) -> None:
        window = self.settings.idempotency_window_s
        for key in [k for k, (_, t) in self.idempotency.items() if now - t > window]:
            del self.idempotency[key]

    def _detach(self, lease_id: str) -> Lease | None:
        """Remove a lease from the maps (its slot is free at once); the caller tears it down. Under self._lock."""
        lease = self.leases.pop(lease_id, None)
        if lease is None:
            return None
        lease.closed = True
        runs = self.by_task.get(lease.task_key)
        if runs is not None:
            runs.discard(lease_id)
            if not runs:
                del self.by_task[lease.task_key]
        return lease

    async def close(self, lease_id: str) -> bool:
        """Close a lease; False if it was not known (already closed, reaped, or never allocated here)."""
        async with self._lock:
            lease = self._detach(lease_id)
        if lease is None:
            return False
        await self._teardown(lease, "closed by the client")
        return True

    async def _teardown(self, lease: Lease, reason: str) -> None:
        """Wait for the lease's running call, close its environment (bounded), remove its directory, record it."""
        # the lease's own lock first: a teardown waiting for a long call must not hold one of the close slots
        async with lease.lock, self._closes:
            env, lease.env = lease.env, None
            if env is not None:
                try:
                    await asyncio.wait_for(self.provider.close(env), self.settings.close_timeout_s)
                except Exception as e:
                    self.counters["close_errors"] += 1
                    logger.warning("env pool: closing lease %s failed: %r", lease.lease_id, e)
            await asyncio.to_thread(fs_tree.remove_tree, self._workdir(lease.lease_id))
            await asyncio.to_thread(self.store.closed, lease.lease_id, reason)
        self.counters["closed"] += 1

    def _close_in_background(self, lease: Lease, reason: str) -> None:
        task = asyncio.create_task(self._teardown(lease, reason))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def reap_idle(self) -> int:
        """Close leases unused for longer than idle_ttl_s (a lease inside a call is in use, not idle)."""
        now = time.monotonic()
        async with self._lock:
            idle = [lease_id for lease_id, lease in self.leases.items()
                    if not lease.lock.locked() and now - lease.last_used > self.settings.idle_ttl_s]
            leases = [self._detach(lease_id) for lease_id in idle]
        for lease in leases:
            logger.info("env pool: lease %s (%s) idle for more than %.0f s: closing", lease.lease_id, lease.task_key,
                        self.settings.idle_ttl_s)
            self.counters["reaped_idle"] += 1
            self._close_in_background(lease, "idle TTL")
        return len(leases)

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reap_interval_s)
            try:
                await self.reap_idle()
            except Exception:
                logger.exception("env pool: the idle reaper failed (will retry)")

    # -------------------------------------------------------------------------------- calls on a lease

    def get(self, lease_id: str) -> Lease:
        if not isinstance(lease_id, str) or not lease_id:
            raise PoolError(400, "BAD_REQUEST", "lease_id must be a non-empty string")
        lease = self.leases.get(lease_id)
        if lease is None:
            raise PoolError(404, "UNKNOWN_LEASE", f"unknown lease {lease_id!r} (closed, reaped, or never allocated "
                                                  "on this server)")
        return lease

    def heartbeat(self, lease_id: str) -> None:
        self.get(lease_id).touch()

    def _workdir(self, lease_id: str) -> str:
        return os.path.join(self.lease_root, lease_id)

    async def _call(self, lease_id: str, what: str, timeout: float, fn, *, needs_env: bool = True):
        lease = self.get(lease_id)
        async with lease.lock:
            if lease.closed:  # closed while this call waited for the lock
                raise PoolError(404, "UNKNOWN_LEASE", f"lease {lease_id!r} was closed")
            if needs_env and lease.env is None:
                raise PoolError(409, "NOT_RESET", f"lease {lease_id!r} has no environment yet: call /reset first")
            lease.touch()
            lease.calls += 1
            try:
                return await asyncio.wait_for(fn(lease), timeout)
            except TimeoutError:
                raise PoolError(504, "TIMEOUT", f"{what} did not finish within {timeout:g} s") from None
            except ProviderError as e:
                raise PoolError(e.status, e.code, e.message) from None
            finally:
                lease.touch()

    async def reset(self, lease_id: str, request: dict) -> dict:
        async def run(lease: Lease) -> dict:
            if lease.env is not None:  # a second reset starts over in a fresh directory
                env, lease.env = lease.env, None
                await self.provider.close(env)
            workdir = self._workdir(lease.lease_id)
            await asyncio.to_thread(fs_tree.remove_tree, workdir)
            os.makedirs(workdir, mode=0o700)
            env, reply = await self.provider.reset(LeaseContext(lease.lease_id, lease.task_key, workdir), request)
            lease.env = env
            await asyncio.to_thread(self.store.set_resources, lease.lease_id, self.provider.resources(env))
            return reply

        return await self._call(lease_id, "reset", self.settings.reset_timeout_s, run, needs_env=False)

    async def exec_tool(self, lease_id: str, tool_call: dict) -> dict:
        if not isinstance(tool_call, dict) or not isinstance(tool_call.get("name"), str):
            raise PoolError(400, "BAD_REQUEST", "tool_call must be an object with a string 'name'")
        arguments = tool_call.get("arguments", {})
        if not isinstance(arguments, dict):
            raise PoolError(400, "BAD_REQUEST", "tool_call.arguments must be an object")
        return await self._call(lease_id, "exec_tool", self.settings.exec_timeout_s,
                                lambda lease: self.provider.exec_tool(lease.env, tool_call))

    async def evaluate(self, lease_id: str, request: dict) -> dict:
        return await self._call(lease_id, "evaluate", self.settings.evaluate_timeout_s,
                                lambda lease: self.provider.evaluate(lease.env, request))

    # -------------------------------------------------------------------------------- status

    def status(self) -> dict:
        return {
            "max_tasks": self.settings.max_tasks,
            "active_tasks": len(self.by_task),
            "max_runs_per_task": self.settings.max_runs_per_task,
            "total_active_runs": len(self.leases),
            "pending_closes": len(self._pending),
            "tasks": {key: {"active_runs": len(runs)} for key, runs in sorted(self.by_task.items())},
            "counters": dict(self.counters),
            "provider": getattr(self.provider, "name", type(self.provider).__name__),
        }
