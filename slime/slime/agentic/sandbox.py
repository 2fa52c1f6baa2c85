"""One sandbox for every agentic setting (terminal, SWE, GUI, tool calls): run a command or a Python program
with no network, a read-only system, a private writable work directory, a clean environment, an unprivileged
uid, rlimits, a wall-clock timeout that kills the whole process tree, and output truncated at the sandbox.

How (``isolation="bwrap"``, the default; the recipe of ``../shared/reference/track2_machine_facts.md``):

* bubblewrap as root **without** a user namespace: ``--unshare-net --unshare-pid --unshare-ipc --unshare-uts
  --unshare-cgroup --die-with-parent --new-session``. The new root is an empty tmpfs with read-only binds of
  ``/usr`` and ``/etc`` (plus the ``/bin``, ``/lib``, ``/lib64`` symlinks), the project's interpreter bound
  read-only at its **original path** (``sys.base_prefix`` and the venv ``sys.prefix``; their parents created
  0755 so an unprivileged uid can traverse them), the work directory bound read-write, a size-capped tmpfs
  ``/tmp`` (mode 1777), a minimal ``/dev`` and the sandbox's own ``/proc``. Nothing else exists inside.
* ``setpriv`` then drops to a uid/gid leased from a :class:`UidPool` (one uid per live sandbox, so
  RLIMIT_NPROC, which the kernel counts per uid machine-wide, is a per-sandbox limit), clears supplementary
  groups, empties every capability set and sets NoNewPrivs.
* rlimits (:class:`SandboxLimits`: CPU, address space, processes, file size, open files, no core files) are set
  before bwrap is exec'd, by util-linux ``prlimit`` as the first link of the exec chain (``prlimit -- bwrap --
  setpriv -- cmd``), and inherited by everything inside. A Python ``preexec_fn`` would do the same but forces a
  full ``fork()`` of the caller (91 ms per start with a 2 GiB rollout process, 1.8 ms through prlimit); it is
  only the fallback where prlimit is missing.
* The environment is exactly :func:`sandbox_env` (PATH, HOME=work dir, LANG, SHELL, thread caps, plus what the
  caller passes explicitly). It is handed to bwrap as its whole environment (equivalent to ``--clearenv``
  followed by ``--setenv``, without putting values on bwrap's command line, which every host user can read).
* The process starts in a new session. The pid namespace ends with its init: when the command exits, the
  kernel kills whatever it left behind (``sleep 1000 &``, ``setsid``, double forks), and ``run`` returns once the
  last of them has finished exiting (a cheap /proc check of the uid). On a timeout (or a cancelled run) the sandbox's init and bwrap are SIGKILLed and every process of the sandbox uid
  is swept until none is left, before :meth:`Sandbox.run` returns.
* stdout and stderr are read concurrently in chunks; at most ``max_output_bytes`` of each are kept (the head
  and the tail), the rest is counted and dropped, so a 100 MB print never sits in the caller's memory.

``isolation="rlimits"`` is the weaker mode for hosts without bubblewrap or namespaces, only when the caller
asks for it (logged as a WARNING on every start): rlimits, the clean environment, a private work directory
(mode 0700), a new session killed as a group, and, when running as root, the same per-sandbox uid (whose
leftover processes are swept after every run). It has **no** network isolation and the whole filesystem is
visible (as far as that uid's permissions go; a project Python under ``/root`` (0700) cannot start there, so
``run_python`` refuses with that reason unless given ``python=/usr/bin/python3``).

API: ``async`` first (asyncio's subprocess transport and stream readers, as ``asyncio.create_subprocess_exec``
uses, plus an exit future that does not wait for the pipes; the event loop is never blocked, many sandboxes run
at once), with thin ``*_sync`` wrappers::

    async with Sandbox() as box:                 # a persistent work dir for a multi-step episode
        await box.run("echo hi > a.txt")         # a string runs as `bash -lc`
        r = await box.run(["cat", "a.txt"])      # a list is an argv
        r = await box.run_python("print(1 + 1)")
    r = await run_python("import sympy; print(sympy.factorint(360))")   # one shot: fresh dir, removed after

Long-lived processes: :meth:`Sandbox.spawn` starts one process with the same argv construction (prlimit, bwrap,
setpriv, the clean environment) and returns at once with its pipes (a :class:`SandboxProcess`). It holds the
sandbox while it lives (``run`` refuses meanwhile), its lifetime is bounded (``limits.timeout_s``), and however
it ends (its exit or crash, ``kill()``/``aclose()``, the lifetime, a cancelled event loop, ``close()``) the
namespace is killed and the uid swept exactly as after a timed-out run; then the sandbox takes commands again.
Everything it writes is the sandbox's: read its stdout with timeouts and bounded lines (``stdout_limit``)::

    proc = await box.spawn(["python", "-u", "-c", PROGRAM], timeout=3600)   # lifetime: one hour
    proc.stdin.write(b'{"op": "ping"}\n'); await proc.stdin.drain()
    line = await asyncio.wait_for(proc.stdout.readline(), 10)
    await proc.kill()                                                        # free and clean again

(:mod:`slime.agentic.shell_sessions` runs its tmux shell host this way.)
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import fcntl
import functools
import logging
import math
import os
import resource
import shlex
import shutil
import signal as _signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Self, Union

from slime.agentic import cgroups, fs_tree, sandbox_disk, seccomp

logger = logging.getLogger(__name__)

ISOLATIONS = ("bwrap", "rlimits")
# Paths that are part of the read-only system view (bound or symlinked); nothing under them is bound again.
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/lib", "/lib64", "/sbin")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_UID_RANGE = (20000, 1000)  # first uid, count: 20000-20999
UID_RANGE_ENV = "SLIME_SANDBOX_UIDS"  # "20000-20999" overrides the default pool
# Not secrets: they keep numeric libraries inside RLIMIT_NPROC (threads count as processes) and RLIMIT_AS on a
# host with many cores. A caller's `env` overrides them.
THREAD_CAPS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
_READ_CHUNK = 64 * 1024
_DRAIN_GRACE_S = 2.0  # after the process is gone, how long its pipes may take to reach EOF
_SWEEP_DEADLINE_S = 5.0

Command = Union[str, Sequence[str]]
Bind = Union[str, "tuple[str, str]"]


class SandboxError(RuntimeError):
    """The sandbox could not run the command (not: the command failed; see SandboxResult.exit_code)."""


class SandboxUnavailable(SandboxError):
    """The requested isolation cannot be provided on this host; the message names what is missing."""


class SandboxBusy(SandboxError):
    """Every uid of the pool is leased (too many live sandboxes for the configured range)."""


# ------------------------------------------------------------------------------------------------ limits


GROUP_ROOT_PROCESSES = 2  # root processes of a start that stay in the sandbox's group: bwrap and its pid-1 init
NPROC_SLACK = 8  # with a group, RLIMIT_NPROC sits this far above the process budget: the group's count binds first


@dataclass(frozen=True)
class SandboxLimits:
    """Per-run limits. Each process inside gets the rlimits; the wall-clock timeout and the output caps apply
    to the whole run. Values above the caller's own hard limits are lowered to them (never raised)."""

    timeout_s: float = 60.0  # wall clock; the whole process tree is killed when it passes
    cpu_seconds: int = 60  # RLIMIT_CPU per process (SIGXCPU, then SIGKILL one second later)
    memory_bytes: int = 2 << 30  # RLIMIT_AS per process (a Python MemoryError, or a failed allocation)
    max_processes: int = 64  # RLIMIT_NPROC: processes + threads of the sandbox uid
    file_size_bytes: int = 256 << 20  # RLIMIT_FSIZE: largest file a process may write
    open_files: int = 256  # RLIMIT_NOFILE
    tmp_size_bytes: int = 256 << 20  # size of the private tmpfs /tmp (bwrap mode)
    max_output_bytes: int = 64 << 10  # per stream, head and tail kept (half each)
    # whole-sandbox budgets (a control group per sandbox, slime.agentic.cgroups; taken from the limits the sandbox
    # is made with, not per run): memory of all its processes together (None: memory_bytes), CPUs (a CFS quota).
    # The process budget is max_processes (+ bwrap's own two root processes); RLIMIT_NPROC then sits above it.
    memory_budget_bytes: int | None = None
    cpu_budget: float = 1.0
    # the disk budget of a work directory the sandbox makes (its own ext4, slime.agentic.sandbox_disk) and the file
    # count of its private /tmp (with tmp_size_bytes); a caller's own directory is the caller's to cap
    disk_budget_bytes: int = 1 << 30
    file_budget: int = 100_000
    tmp_files: int = 20_000

    def __post_init__(self) -> None:
        def positive(name: str, minimum: float = 1) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
                raise ValueError(f"SandboxLimits.{name} must be a number >= {minimum}, got {value!r}")

        positive("timeout_s", 0.001)
        for name, minimum in (
            ("cpu_seconds", 1),
            ("memory_bytes", 32 << 20),
            ("max_processes", 1),
            ("file_size_bytes", 1),
            ("open_files", 16),
            ("tmp_size_bytes", 1 << 20),
            ("max_output_bytes", 2),
            ("disk_budget_bytes", 16 << 20),
            ("file_budget", 256),
            ("tmp_files", 64),
        ):
            positive(name, minimum)
            if not isinstance(getattr(self, name), int):
                raise ValueError(f"SandboxLimits.{name} must be an int, got {getattr(self, name)!r}")
        positive("cpu_budget", 0.01)
        if self.memory_budget_bytes is not None:
            positive("memory_budget_bytes", 32 << 20)
            if not isinstance(self.memory_budget_bytes, int):
                raise ValueError(f"SandboxLimits.memory_budget_bytes must be an int, got {self.memory_budget_bytes!r}")

    def with_timeout(self, timeout: float) -> SandboxLimits:
        """These limits for a run of `timeout` seconds of wall clock, with a per-process CPU limit that does not cut it
        shorter (a test phase, a long command)."""
        return dataclasses.replace(self, timeout_s=timeout, cpu_seconds=max(self.cpu_seconds, math.ceil(timeout) + 1))

    @property
    def memory_budget(self) -> int:
        return self.memory_budget_bytes if self.memory_budget_bytes is not None else self.memory_bytes

    @property
    def process_budget(self) -> int:
        return self.max_processes + GROUP_ROOT_PROCESSES

    def rlimits(self, hard_limits: Mapping[int, int] | None = None) -> dict[int, tuple[int, int]]:
        """(soft, hard) per resource, lowered to `hard_limits` (default: this process's hard limits)."""
        wanted = {
            resource.RLIMIT_CPU: (self.cpu_seconds, self.cpu_seconds + 1),
            resource.RLIMIT_AS: (self.memory_bytes, self.memory_bytes),
            resource.RLIMIT_NPROC: (self.max_processes, self.max_processes),
            resource.RLIMIT_FSIZE: (self.file_size_bytes, self.file_size_bytes),
            resource.RLIMIT_NOFILE: (self.open_files, self.open_files),
            resource.RLIMIT_CORE: (0, 0),
        }
        out = {}
        for res, (soft, hard) in wanted.items():
            cap = hard_limits[res] if hard_limits is not None else resource.getrlimit(res)[1]
            if cap != resource.RLIM_INFINITY:
                soft, hard = min(soft, cap), min(hard, cap)
            out[res] = (soft, hard)
        return out


def _close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _apply_rlimits(limits: Mapping[int, tuple[int, int]]) -> None:  # runs in the child between fork and exec
    for res, value in limits.items():
        resource.setrlimit(res, value)


_PRLIMIT_NAMES = {
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_AS: "as",
    resource.RLIMIT_NPROC: "nproc",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_NOFILE: "nofile",
    resource.RLIMIT_CORE: "core",
}


def prlimit_argv(limits: Mapping[int, tuple[int, int]], prlimit: str = "prlimit") -> list[str]:
    """`prlimit --cpu=S:H ... --`: sets the rlimits on itself, then execs the rest of the argv (bwrap), which
    inherits them. Same effect as a Python pre-exec hook, without one: a pre-exec hook forces a full fork() of
    the caller (91 ms per start measured with a 2 GiB parent, against 1.8 ms through prlimit)."""

    def fmt(v: int) -> str:
        return "unlimited" if v == resource.RLIM_INFINITY else str(v)

    return [prlimit, *(f"--{_PRLIMIT_NAMES[r]}={fmt(soft)}:{fmt(hard)}" for r, (soft, hard) in limits.items()), "--"]


# ------------------------------------------------------------------------------------------------ output


class OutputCapture:
    """Keeps the first `limit - limit // 2` and the last `limit // 2` bytes of a stream and counts the rest.
    Memory stays O(limit) whatever is fed."""

    def __init__(self, limit: int):
        if limit < 2:
            raise ValueError("OutputCapture limit must be >= 2")
        self.limit = limit
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self.tail_limit + _READ_CHUNK:  # trim in amortised steps
                del self._tail[: len(self._tail) - self.tail_limit]

    @property
    def tail(self) -> bytes:
        return bytes(self._tail[len(self._tail) - self.tail_limit :]) if self.tail_limit else b""

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    @property
    def omitted(self) -> int:
        return max(0, self.total - self.limit)

    def getvalue(self) -> bytes:
        """All bytes when nothing was dropped, else head + tail (without a marker)."""
        return bytes(self.head) + (self.tail if self.truncated else bytes(self._tail))

    def text(self) -> str:
        """Decoded (invalid UTF-8 replaced); a truncated stream gets a marker between head and tail."""
        if not self.truncated:
            return self.getvalue().decode("utf-8", "replace")
        marker = f"\n[... {self.omitted} bytes truncated ({self.total} in all) ...]\n"
        return self.head.decode("utf-8", "replace") + marker + self.tail.decode("utf-8", "replace")


# ------------------------------------------------------------------------------------------------ result


@dataclass
class SandboxResult:
    exit_code: int  # shell convention: 128+N when killed by signal N (bwrap reports its child that way)
    stdout: str
    stderr: str
    timed_out: bool = False
    duration_s: float = 0.0
    signal: int | None = None  # the signal that ended the command, if any (SIGKILL after a timeout)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_bytes: int = 0  # total size produced, kept or not
    stderr_bytes: int = 0
    isolation: str = "bwrap"
    uid: int | None = None
    budget_exceeded: str = ""  # which whole-sandbox budget this run hit, in words (empty: none)

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return _signal.Signals(self.signal).name
        except ValueError:
            return str(self.signal)


# ------------------------------------------------------------------------------------------------ uids


class UidPool:
    """Leases uids from [first, first + count) to live sandboxes, one uid each.

    A lease is an exclusive ``flock`` on ``<lock_dir>/<uid>.lock``, so several processes on one host (rollout
    workers, test runs) share the range safely, and a crashed process releases its uids with its file
    descriptors. The cursor rotates, so a released uid is the last to be handed out again.

    The lock directory is trusted only when this process's user owns it, it is a real directory (not a
    symlink) and nobody else may write to or list it (mode 0700): one another user made first, or loosened,
    could hand two sandboxes the same uid or redirect a lock file. A lock file is opened without following a
    symlink and must be a regular file of ours. Anything else is refused with a SandboxError naming the path."""

    def __init__(self, first: int = DEFAULT_UID_RANGE[0], count: int = DEFAULT_UID_RANGE[1], lock_dir: str | None = None):
        if isinstance(first, bool) or not isinstance(first, int) or first < 1000:
            raise ValueError(f"UidPool: sandbox uids must be unprivileged numeric uids >= 1000, got first={first!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1 or first + count > 2**31 - 2:
            raise ValueError(f"UidPool: count must be >= 1 and the range inside 32-bit uids, got count={count!r}")
        self.first, self.count = first, count
        self.lock_dir = lock_dir or os.path.join(tempfile.gettempdir(), f"slime-sandbox-uids-{os.geteuid()}")
        self._lock = threading.Lock()
        self._held: dict[int, int] = {}  # uid -> lock fd
        self._cursor = 0

    @classmethod
    def parse_range(cls, spec: str) -> tuple[int, int]:
        """"20000-20999" (inclusive) -> (20000, 1000)."""
        try:
            lo, hi = (int(x) for x in spec.strip().split("-", 1))
        except ValueError:
            raise ValueError(f"{UID_RANGE_ENV}: expected FIRST-LAST, e.g. 20000-20999, got {spec!r}") from None
        if hi < lo:
            raise ValueError(f"{UID_RANGE_ENV}: LAST < FIRST in {spec!r}")
        return lo, hi - lo + 1

    @classmethod
    def from_env(cls) -> UidPool:
        spec = os.environ.get(UID_RANGE_ENV)
        return cls(*cls.parse_range(spec)) if spec else cls()

    @property
    def uids(self) -> range:
        return range(self.first, self.first + self.count)

    @property
    def leased(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._held)

    def _checked_lock_dir(self) -> None:
        try:
            os.mkdir(self.lock_dir, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(self.lock_dir)
        problem = ("is not a directory (a symlink or a file)" if not stat.S_ISDIR(st.st_mode) else
                   f"belongs to uid {st.st_uid}, not to this process's uid {os.geteuid()}" if st.st_uid != os.geteuid() else
                   f"has mode {stat.S_IMODE(st.st_mode):04o}: others may change or list it" if st.st_mode & 0o077 else "")
        if problem:
            raise SandboxError(f"the sandbox uid pool's lock directory {self.lock_dir} {problem}; remove it (or choose "
                               "another with UidPool(lock_dir=...)) so a private one is made")

    def _open_lock(self, uid: int) -> int:
        path = os.path.join(self.lock_dir, f"{uid}.lock")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise SandboxError(f"the sandbox uid lock {path} cannot be opened safely ({e.strerror}: a symlink?)") from e
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(fd)
            raise SandboxError(f"the sandbox uid lock {path} is not a regular file of uid {os.geteuid()}")
        return fd

    def acquire(self) -> int:
        with self._lock:
            self._checked_lock_dir()
            for i in range(self.count):
                uid = self.first + (self._cursor + i) % self.count
                if uid in self._held:
                    continue
                fd = self._open_lock(uid)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[uid] = fd
                self._cursor = (uid - self.first + 1) % self.count
                return uid
        raise SandboxBusy(
            f"all {self.count} sandbox uids {self.first}-{self.first + self.count - 1} are in use "
            f"(set {UID_RANGE_ENV}=FIRST-LAST for a larger range)"
        )

    def try_acquire(self, uid: int) -> bool:
        """Lease this particular uid if nobody holds it (True), else leave it (False)."""
        if uid not in self.uids:
            raise ValueError(f"uid {uid} is outside this pool's range {self.first}-{self.first + self.count - 1}")
        with self._lock:
            if uid in self._held:
                return False
            self._checked_lock_dir()
            fd = self._open_lock(uid)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            self._held[uid] = fd
            return True

    def release(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock


_default_pool: UidPool | None = None
_default_pool_lock = threading.Lock()


def default_uid_pool() -> UidPool:
    global _default_pool
    with _default_pool_lock:
        if _default_pool is None:
            _default_pool = UidPool.from_env()
        return _default_pool


# ------------------------------------------------------------------------------------------------ processes


def _scan_proc_one(entry: str, wanted: set[int]) -> tuple[int, int, str, int] | None:
    try:
        with open(f"/proc/{entry}/status", "rb") as f:
            status = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    fields = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("Name", "State", "Uid", "Threads"):
            fields[key] = value.split()
    state = (fields.get("State") or ["?"])[0]
    threads = int((fields.get("Threads") or ["1"])[0])
    # a zombie is dead, unless its main thread exited alone (exit(2), not exit_group) while other threads run on:
    # it shows state Z with Threads > 1, and SIGKILL kills those threads
    if state == "X" or (state == "Z" and threads <= 1):
        return None
    ids = [int(x) for x in (fields.get("Uid") or [])[:3]]
    hit = next((u for u in ids if u in wanted), None)
    if hit is None:
        return None
    return int(entry), hit, " ".join(fields.get("Name") or []), threads


def _scan_proc(uids: Iterable[int]) -> list[tuple[int, int, str, int]]:
    """Live processes (not zombies, but for a zombie main thread whose other threads run on) whose real, effective
    or saved uid is in `uids`: (pid, uid, name, threads).
    Reads every /proc/N/status (a non-dumpable process cannot hide its uid there)."""
    wanted = set(uids)
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            hit = _scan_proc_one(entry, wanted)
            if hit is not None:
                found.append(hit)
    return found


def uid_processes(uids: Iterable[int]) -> list[tuple[int, int, str]]:
    """Live (not zombie) processes whose real, effective or saved uid is in `uids`: (pid, uid, name).
    A /proc scan: a few milliseconds for a few hundred processes."""
    return [(pid, uid, name) for pid, uid, name, _ in _scan_proc(uids)]


def _uid_has_processes_fast(uid: int) -> bool:
    """A cheap check (one stat per process, no reads) for live processes whose /proc entry belongs to `uid`.
    Not for adversaries (a non-dumpable process's /proc entry belongs to root): only used after bwrap's pid
    namespace is gone, when anything left is already SIGKILLed by the kernel and just finishing its exit."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid and _scan_proc_one(entry, {uid}):
                    return True
            except OSError:
                pass
    return False


def _kill_uid_processes(uid: int) -> None:
    """SIGKILL every process of `uid` until none is left (a fork bomb refills between scans; RLIMIT_NPROC
    bounds it). Only for a uid leased to this sandbox; never the caller's own uid."""
    if uid == os.getuid() or uid == os.geteuid():
        raise SandboxError("refusing to sweep the caller's own uid")
    deadline = time.monotonic() + _SWEEP_DEADLINE_S
    while True:
        procs = uid_processes([uid])
        if not procs:
            return
        for pid, _, _ in procs:
            try:
                os.kill(pid, _signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            logger.error("sandbox: processes of uid %d still alive after %.0f s: %s", uid, _SWEEP_DEADLINE_S, procs)
            return
        time.sleep(0.005)


def reap_uid(uid: int, pool: UidPool | None = None) -> bool:
    """Kill what a dead owner left running as a sandbox `uid` (e.g. a recorded lease of a crashed server), but only
    while nobody holds the uid: a uid leased again since then belongs to a live sandbox, whose processes are not
    ours to kill. True when the uid was free and is now empty."""
    pool = pool or default_uid_pool()
    if uid not in pool.uids or not pool.try_acquire(uid):
        return False
    try:
        _kill_uid_processes(uid)
    finally:
        pool.release(uid)
    return True


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


# ------------------------------------------------------------------------------------------------ capability


@dataclass(frozen=True)
class Capability:
    isolation: str
    available: bool
    problem: str = ""  # what is missing, when not available
    bwrap: str | None = None
    setpriv: str | None = None
    root: bool = False
    prlimit: str | None = None  # util-linux; without it the rlimits are set in a (slower) Python pre-exec hook
    seccomp: bool = False  # bwrap mode: the seccomp filter (slime.agentic.seccomp) is installed on every start
    budgets: bool = False  # bwrap mode: a control group per sandbox keeps its whole-sandbox budgets (slime.agentic.cgroups)


SECCOMP_ENV = "SLIME_SANDBOX_SECCOMP"  # "off": run without the seccomp filter (a weaker, logged guarantee)


_OPT_IN = "or pass isolation='rlimits' to opt into the weaker rlimit-only mode (no network isolation)"


@functools.lru_cache(maxsize=None)
def detect_capability(isolation: str = "bwrap") -> Capability:
    """What this host can do, checked once per isolation (cached; `detect_capability.cache_clear()` to redo)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
    bwrap, setpriv, root = shutil.which("bwrap"), shutil.which("setpriv"), os.geteuid() == 0
    prlimit = shutil.which("prlimit")
    if isolation == "rlimits":
        if root and setpriv is None:  # never run sandboxed code as root
            problem = "setpriv not found (Debian util-linux): as root, the rlimits mode still drops to an unprivileged uid"
            return Capability("rlimits", False, problem, bwrap, setpriv, root, prlimit)
        return Capability("rlimits", True, bwrap=bwrap, setpriv=setpriv, root=root, prlimit=prlimit)
    if bwrap is None:
        problem = f"bubblewrap not installed (no `bwrap` on PATH): run scripts/setup_env.sh or apt-get install bubblewrap, {_OPT_IN}"
    elif setpriv is None:
        problem = f"setpriv not found (Debian util-linux): apt-get install util-linux, {_OPT_IN}"
    elif not root:
        problem = (
            "the bwrap sandbox drops to a per-sandbox uid with setpriv, which needs root (CAP_SETUID/CAP_SETGID); "
            f"this process runs as uid {os.geteuid()}: run it as root, {_OPT_IN}"
        )
    else:
        probe = build_bwrap_argv(["true"], workdir=None, uid=65534, gid=65534, limits=SandboxLimits(), interpreter=(), bwrap=bwrap, setpriv=setpriv)
        try:
            proc = subprocess.run(probe, check=False, env={"PATH": DEFAULT_PATH}, capture_output=True, timeout=30)
            problem = "" if proc.returncode == 0 else (
                f"bubblewrap cannot set up its namespaces here ({proc.stderr.decode(errors='replace').strip() or f'exit {proc.returncode}'}): "
                f"network/pid/ipc/mount namespaces are unavailable (e.g. an unprivileged container), {_OPT_IN}"
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"bubblewrap probe failed ({e}), {_OPT_IN}"
        if not problem:
            problem, with_seccomp = _probe_seccomp(bwrap, setpriv)
        if not problem:
            problem, with_budgets = _probe_budgets()
            return Capability("bwrap", not problem, problem, bwrap, setpriv, root, prlimit, with_seccomp, with_budgets)
    return Capability("bwrap", not problem, problem, bwrap, setpriv, root, prlimit)


def _probe_budgets() -> tuple[str, bool]:
    """(problem, budgets kept): control groups can hold each sandbox's memory, process and CPU budgets here, or the
    user opted out (SLIME_SANDBOX_BUDGETS=off: per-process rlimits only, logged by name), or the sandbox refuses."""
    weaker = ("without a control group and disks of its own per sandbox only the per-process rlimits apply: many "
              "processes together can hold several times the memory limit, CPU is not shared out, and a sandbox can "
              "fill the host's disk and its file table")
    if os.environ.get(cgroups.BUDGETS_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        logger.warning("sandbox: %s=off (opted in): %s", cgroups.BUDGETS_ENV, weaker)
        return "", False
    support = cgroups.detect()
    if support.version is None:
        return f"{support.problem}; set {cgroups.BUDGETS_ENV}=off to start anyway: {weaker}", False
    try:  # the hierarchy may be mounted but refuse new groups (a read-only or delegated mount)
        cgroups.SandboxCgroup(64 << 20, 8, 1.0, support=support).close()
    except OSError as e:
        return f"cannot make a control group here ({e}); set {cgroups.BUDGETS_ENV}=off to start anyway: {weaker}", False
    probe = tempfile.mkdtemp(prefix="slime-sandbox-probe-")
    try:  # a loop-mounted ext4 (the work directory's disk budget) and a tmpfs with a file count (/tmp's)
        os.mkdir(os.path.join(probe, "disk"))
        sandbox_disk.CappedDirectory(os.path.join(probe, "disk"), 16 << 20, 256).close()
        sandbox_disk.CappedTmp(os.path.join(probe, "tmp"), 1 << 20, 64).close()
    except OSError as e:
        return (f"cannot make a sandbox's capped disk here ({e}: loop devices and mkfs.ext4 are needed); set "
                f"{cgroups.BUDGETS_ENV}=off to start anyway: {weaker}"), False
    finally:
        fs_tree.remove_tree(probe)
    # once per process: what killed owners left (their groups, disks and /tmp mounts; a live owner's stay)
    swept = cgroups.sweep_stale() + sandbox_disk.sweep_stale()
    if swept:
        logger.info("sandbox: swept %d control group(s) and mount(s) of sandbox owners that are gone", swept)
    return "", True


def _probe_seccomp(bwrap: str, setpriv: str) -> tuple[str, bool]:
    """(problem, filter in use): the seccomp filter installs here, or the user opted out of it (SLIME_SANDBOX_SECCOMP=off:
    started with a logged, named weaker guarantee), or the sandbox refuses to start."""
    opted_out = os.environ.get(SECCOMP_ENV, "").strip().lower() in ("off", "0", "false", "no")
    weaker = ("without the seccomp filter, sandboxed code can use kernel keyrings (which outlive the episode), create "
              "user namespaces, io_uring, and socket families beyond unix/inet")
    if opted_out:
        logger.warning("sandbox: %s=off (opted in): %s", SECCOMP_ENV, weaker)
        return "", False
    try:
        fd = seccomp.filter_fd()
    except (seccomp.SeccompUnsupported, OSError) as e:
        return (f"the sandbox's seccomp filter cannot be built here ({e}); set {SECCOMP_ENV}=off to start anyway: "
                f"{weaker}"), False
    try:
        probe = build_bwrap_argv(["true"], workdir=None, uid=65534, gid=65534, limits=SandboxLimits(), interpreter=(),
                                 bwrap=bwrap, setpriv=setpriv, seccomp_fd=fd)
        proc = subprocess.run(probe, check=False, env={"PATH": DEFAULT_PATH}, capture_output=True, timeout=30,
                              pass_fds=(fd,))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the seccomp probe failed ({e}); set {SECCOMP_ENV}=off to start anyway: {weaker}", False
    finally:
        os.close(fd)
    if proc.returncode != 0:
        return (f"bubblewrap cannot install the seccomp filter here ({proc.stderr.decode(errors='replace').strip() or f'exit {proc.returncode}'}); "
                f"set {SECCOMP_ENV}=off to start anyway: {weaker}"), False
    return "", True


def require_capability(isolation: str = "bwrap") -> Capability:
    cap = detect_capability(isolation)
    if not cap.available:
        raise SandboxUnavailable(cap.problem)
    return cap


# ------------------------------------------------------------------------------------------------ argv


@functools.cache  # the interpreter does not move: computed once, not on every tool call
def interpreter_dirs() -> tuple[str, ...]:
    """The directories the project's interpreter needs, at their real paths: the base installation and the
    venv (when different); those already inside the read-only system view are left out."""
    out: list[str] = []
    for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix):
        for path in {os.path.abspath(p), os.path.realpath(p)}:
            if path not in out and not _under(path, SYSTEM_PATHS) and path != "/":
                out.append(path)
    return tuple(out)


def reachable_by_others(path: str) -> bool:
    """Whether any uid can execute `path` on the host (every directory on its real path is o+x). In the bwrap
    mode it does not matter (the interpreter's parents are recreated inside); in the rlimits mode the
    sandbox uid sees the host's permissions, and a Python under /root (0700) cannot start."""
    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & 0o001:
            return False
        return all(os.stat(str(p)).st_mode & 0o001 for p in Path(real).parents)
    except OSError:
        return False


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _normalize_binds(binds: Iterable[Bind]) -> list[tuple[str, str]]:
    out = []
    for b in binds:
        src, dest = (b, b) if isinstance(b, str) else b
        src, dest = os.path.abspath(src), os.path.abspath(dest)
        out.append((src, dest))
    return out


def sandbox_env(home: str, extra: Mapping[str, str] | None = None, path: str | None = None) -> dict[str, str]:
    """The whole environment inside: PATH (the venv's bin first), HOME, LANG, SHELL, the thread caps, and
    `extra` (the caller's explicit additions, which win). Nothing is inherited from the parent."""
    venv_bin = os.path.join(sys.prefix, "bin")
    env = {
        "PATH": path or (f"{venv_bin}:{DEFAULT_PATH}" if sys.prefix != sys.base_prefix else DEFAULT_PATH),
        "HOME": home,
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        **THREAD_CAPS,
    }
    for k, v in (extra or {}).items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or "=" in k or "\0" in k + v:
            raise ValueError(f"sandbox env: invalid variable {k!r}={v!r}")
        env[k] = v
    return env


def shell_argv(command: str, path: str) -> list[str]:
    """`bash -lc command` with PATH restored (a login shell resets it from /etc/profile); same line, so bash's
    line numbers in error messages are the command's own."""
    return ["bash", "-lc", f"export PATH={shlex.quote(path)}; {command}"]


def setpriv_argv(uid: int, gid: int, setpriv: str = "setpriv") -> list[str]:
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]


def build_bwrap_argv(
    command: Sequence[str],
    *,
    workdir: str | None,
    uid: int,
    gid: int,
    limits: SandboxLimits,
    inner_workdir: str | None = None,
    cwd: str | None = None,
    interpreter: Sequence[str] | None = None,
    ro_binds: Iterable[Bind] = (),
    rw_binds: Iterable[Bind] = (),
    bwrap: str = "bwrap",
    setpriv: str = "setpriv",
    seccomp_fd: int | None = None,
    tmp_dir: str | None = None,
) -> list[str]:
    """The full argv: bwrap's namespaces and mounts, then setpriv's drop to `uid`, then `command`. Pure.
    `seccomp_fd`: a descriptor the child inherits holding the filter program (`seccomp.filter_fd`). `tmp_dir`: a
    host directory (the sandbox's capped tmpfs) bound at /tmp instead of a fresh bwrap tmpfs."""
    if not command:
        raise ValueError("empty command")
    inner_workdir = inner_workdir or workdir
    argv = [bwrap, "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    argv += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for link, target in (("/bin", "usr/bin"), ("/lib", "usr/lib"), ("/lib64", "usr/lib64"), ("/sbin", "usr/sbin")):
        if os.path.islink(link) or not os.path.exists(link):
            argv += ["--symlink", target, link]
        else:  # a host without the merged /usr
            argv += ["--ro-bind", link, link]
    if tmp_dir is not None:
        argv += ["--bind", tmp_dir, "/tmp"]
    else:
        argv += ["--perms", "1777", "--size", str(limits.tmp_size_bytes), "--tmpfs", "/tmp"]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    mounted = set(SYSTEM_PATHS) | {"/tmp", "/dev", "/proc"}  # mount points (exact paths)
    read_only = set(SYSTEM_PATHS)  # nothing can be created below these
    created: set[str] = set()

    def parents(dest: str) -> list[str]:
        # The host's parents may be private (/root is 0700): inside, each missing parent is a fresh directory of
        # mode 0755 so the unprivileged uid can traverse it to reach the bind (the interpreter's trap).
        out = []
        for parent in reversed(Path(dest).parents):
            p = str(parent)
            if p == "/" or p in created or p in mounted or _under(p, read_only):
                continue
            created.add(p)
            out += ["--perms", "0755", "--dir", p]
        return out

    for d in interpreter if interpreter is not None else interpreter_dirs():
        if not _under(d, read_only):
            argv += parents(d) + ["--ro-bind", d, d]
            mounted.add(d)
            read_only.add(d)
    for src, dest in _normalize_binds(ro_binds):
        argv += parents(dest) + ["--ro-bind", src, dest]
        mounted.add(dest)
        read_only.add(dest)
    if workdir is not None:
        argv += parents(inner_workdir) + ["--bind", workdir, inner_workdir]
        mounted.add(inner_workdir)
    for src, dest in _normalize_binds(rw_binds):
        argv += parents(dest) + ["--bind", src, dest]
        mounted.add(dest)
    chdir = os.path.join(inner_workdir, cwd) if (inner_workdir and cwd) else (inner_workdir or "/")
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--chdir", chdir, "--"]
    return argv + setpriv_argv(uid, gid, setpriv) + list(command)


# ------------------------------------------------------------------------------------------------ sandbox


class SandboxBase:
    """What every sandbox backend shares: one command at a time (`run`, `run_python`) or one long-lived process
    (`spawn`), each over the argv the backend builds, with the wall-clock timeout, the output caps, the exit status
    in shell convention, and cleanup however it ends. A backend (:class:`Sandbox`: bubblewrap or rlimits on this
    host; :class:`slime.agentic.docker_sandbox.DockerSandbox`: a container) sets ``isolation``, ``limits``, ``uid``,
    ``inner_path`` (the work directory inside), ``python`` (an interpreter commands inside can run), ``_busy``,
    ``_closed``, ``_spawned``, and implements ``_prepare`` (the argv, environment and limits of one command; it
    starts with ``_begin``), ``_kill_tree`` (kill everything a started process began), ``_after_exit`` (once it
    exited: what it left behind) and ``close``; optionally ``_check_exit`` (an exit status that is the backend's own
    failure) and ``_kill_blocks`` (``_kill_tree`` is slow: a failure path runs it in a thread)."""

    isolation: str
    python: str = sys.executable
    _busy = False
    _closed = True
    _spawned: SandboxProcess | None = None
    _pending_fds: tuple[int, ...] = ()  # descriptors the next start passes to its child (then closes): `_take_fds`

    def _take_fds(self) -> tuple[int, ...]:
        fds, self._pending_fds = self._pending_fds, ()
        return fds

    cgroup = None  # a SandboxCgroup where the backend keeps whole-sandbox budgets itself (bwrap, rlimits as root)

    def budget_exceeded(self, since: dict | None = None) -> str:
        """Which whole-sandbox budget was hit since `since` (a :meth:`budget_mark`; default: since the start), in
        words; "" when none or when this backend keeps no group (Docker enforces its own: --memory, --pids-limit)."""
        return self.cgroup.exceeded(since) if self.cgroup is not None else ""

    def budget_mark(self) -> dict | None:
        return self.cgroup.events() if self.cgroup is not None else None

    @property
    def _signal_statuses(self) -> bool:
        """Whether an exit status 128+N means "killed by signal N": bubblewrap and `docker exec` report their
        child that way; in the rlimits mode the command is the child itself (a signal reads as -N)."""
        return True

    # whether `_kill_tree` may block for long (a docker CLI call): then a failure or cancellation path runs it in a
    # thread and awaits it instead of calling it on the event loop
    _kill_blocks = False

    def _preexec(self, rlimits):  # a pre-exec hook for the started process, if the backend needs one
        return None

    def _check_exit(self, rc: int, stderr: str) -> None:
        """After a command ended: raise SandboxError when its status is the backend's own failure rather than the
        command's (the bwrap sandbox has none to tell apart)."""

    def _command_stderr(self, stderr: str) -> str:
        """What the command wrote to stderr, from what was read (a backend may strip its own lines)."""
        return stderr

    # every backend implements these four
    def _after_exit(self, pid: int, timed_out: bool) -> None:
        raise NotImplementedError

    def _kill_tree(self, pid: int, alive: bool = True) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    async def _prepare(self, command: Command, *, env, timeout, limits, cwd):
        raise NotImplementedError

    # -- lifecycle

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __del__(self) -> None:  # a forgotten sandbox must not hold its uid (or its directory) forever
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception as e:  # interpreter shutdown: modules may be gone
                logger.debug("sandbox: close() from __del__ failed: %s", e)

    def _lease_uid(self, pool: UidPool | None, wanted: bool) -> None:
        """A constructor's start: the uid pool, and a uid leased from it when `wanted` (else None)."""
        self._pool = pool or default_uid_pool()
        self.uid: int | None = self._pool.acquire() if wanted else None

    def _release_uid(self) -> None:
        if self.uid is not None:
            self._pool.release(self.uid)

    @contextlib.contextmanager
    def _starting(self, undo):
        """A constructor's body after :meth:`_lease_uid`: when it fails, the sandbox is closed, ``undo()`` removes
        what was made (its errors are logged: the start's own error is the one to report) and the uid is
        released."""
        try:
            yield
        except BaseException:
            self._closed = True
            try:
                undo()
            except Exception as e:
                logger.debug("sandbox: cleaning up after a failed start: %s", e)
            finally:
                self._release_uid()
            raise

    def _kill_live_spawned(self, kill) -> SandboxProcess | None:
        """``close()``'s start: the last spawned process, killed with ``kill(pid)`` when it still runs."""
        spawned = getattr(self, "_spawned", None)
        if spawned is not None and spawned.returncode is None:
            spawned.killed = True
            kill(spawned.pid)
        return spawned

    # -- running

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")

    # cleanup threads (a kill, the sweep after a command) still running, maybe after their caller was cancelled:
    # the sandbox stays busy until they end, so that no next command (or staging) overlaps them
    _cleanups: frozenset = frozenset()

    def _cleanup_thread(self, fn, *args) -> asyncio.Future:
        """`fn(*args)` in a thread, tracked: await it shielded, so that a cancellation of the caller leaves it
        counted until the thread has really finished."""
        future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        self._cleanups = frozenset(f for f in self._cleanups if not f.done()) | {future}
        return future

    def _cleaning(self) -> bool:
        return any(not f.done() for f in self._cleanups)

    async def _settle(self) -> None:
        """Wait for the cleanup threads a cancelled caller left running (this event loop's; another loop's ended
        with it)."""
        loop = asyncio.get_running_loop()
        pending = [f for f in self._cleanups if not f.done() and f.get_loop() is loop]
        if pending:
            await asyncio.wait(pending)

    def _check_free(self) -> None:
        self._check_open()
        if self._busy or self._cleaning():
            raise SandboxError(
                "this Sandbox is already running a command or holds a spawned process (one at a time; use one "
                "Sandbox per task)"
            )

    def _begin(self, timeout: float | None, limits: SandboxLimits | None) -> SandboxLimits:
        """The start of every backend's `_prepare`: the sandbox must be free; the limits of this command (the
        sandbox's unless given, `timeout` replacing their wall-clock limit)."""
        self._check_free()
        limits = limits or self.limits
        return replace(limits, timeout_s=timeout) if timeout is not None else limits

    async def _kill_now(self, pid: int, alive: bool = True) -> None:
        """`_kill_tree` on a failure or cancellation path. A quick one (bwrap: signals and a /proc sweep) runs right
        here, before anything else can run; one that blocks (`_kill_blocks`: a docker CLI call, up to its timeout) runs
        in a thread and is awaited, so the event loop goes on meanwhile (a second cancellation stops the wait, not
        the kill; its errors are logged: the caller is already failing with its own)."""
        if not self._kill_blocks:
            self._kill_tree(pid, alive)
            return
        kill = self._cleanup_thread(self._kill_tree, pid, alive)
        try:
            await asyncio.shield(kill)
        except asyncio.CancelledError:
            logger.warning("sandbox: cancelled again while killing process %d; the kill goes on in its thread", pid)
        except (SandboxError, OSError, subprocess.SubprocessError) as e:
            logger.warning("sandbox: killing process %d failed: %s", pid, e)

    async def run(
        self,
        command: Command,
        *,
        input: bytes | str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        limits: SandboxLimits | None = None,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
    ) -> SandboxResult:
        """Run `command` (a string: `bash -lc`; a sequence: an argv) in the work directory (or `cwd` inside
        it) and return once it and everything it started are gone. `pass_fds`: descriptors of the caller's that the
        command inherits under the same numbers (the caller keeps and closes them; not through a container)."""
        if pass_fds and self.isolation == "docker":
            raise SandboxError("descriptors cannot be passed into a container (docker exec does not carry them)")
        await self._settle()
        argv, full_env, exec_cwd, limits, rlimits = await self._prepare(command, env=env, timeout=timeout, limits=limits, cwd=cwd)
        self._busy = True
        try:
            return await self._execute(argv, full_env, exec_cwd, limits, rlimits, input, tuple(pass_fds))
        finally:
            self._busy = False

    async def _execute(self, argv, env, exec_cwd, limits, rlimits, input, pass_fds=()) -> SandboxResult:
        data = input.encode() if isinstance(input, str) else input
        mark = self.budget_mark()
        out, err = OutputCapture(limits.max_output_bytes), OutputCapture(limits.max_output_bytes)
        loop = asyncio.get_running_loop()
        exited = loop.create_future()  # the process itself ended (Process.wait() also waits for its pipes)
        start = time.monotonic()
        fds = self._take_fds()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _ExitProtocol(exited, loop),
                *argv,
                stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=exec_cwd,
                start_new_session=True,
                preexec_fn=self._preexec(rlimits),
                pass_fds=fds + pass_fds,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise SandboxError(f"could not start the sandbox ({argv[0]}): {e}") from e
        finally:
            _close_all(fds)
        proc = asyncio.subprocess.Process(transport, protocol, loop)
        readers = [asyncio.ensure_future(_pump(proc.stdout, out)), asyncio.ensure_future(_pump(proc.stderr, err))]
        if data is not None:
            readers.append(asyncio.ensure_future(_feed(proc.stdin, data)))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(asyncio.shield(exited), limits.timeout_s)
            except asyncio.TimeoutError:
                timed_out = True
                await asyncio.shield(self._cleanup_thread(self._kill_tree, proc.pid))
                await exited
            await asyncio.shield(self._cleanup_thread(self._after_exit, proc.pid, timed_out))
            _, pending = await asyncio.wait(readers, timeout=_DRAIN_GRACE_S)
            for task in pending:  # a pipe still held open (only possible in rlimits mode without a uid)
                task.cancel()
            if pending:
                transport.close()
            await asyncio.wait_for(proc.wait(), _DRAIN_GRACE_S)
        except BaseException:  # cancelled (or failed): nothing may outlive the run
            if proc.returncode is None:
                await self._kill_now(proc.pid)
            try:  # let the process be reaped and its pipes reach EOF, so no transport outlives the loop
                await asyncio.wait([exited, *readers], timeout=_DRAIN_GRACE_S)
            except BaseException:
                pass
            for task in readers:
                task.cancel()
            transport.close()
            raise
        duration = time.monotonic() - start
        rc = proc.returncode
        stderr = err.text()
        self._check_exit(rc, stderr)
        command_stderr = self._command_stderr(stderr)
        sig = None
        if timed_out:
            sig = int(_signal.SIGKILL)
        elif rc < 0:
            sig = -rc
        elif self._signal_statuses and 128 < rc <= 128 + 64:
            sig = rc - 128
        exit_code = 128 + sig if (sig is not None and (timed_out or rc < 0)) else rc
        return SandboxResult(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=command_stderr,
            timed_out=timed_out,
            duration_s=duration,
            signal=sig,
            stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            stdout_bytes=out.total,
            stderr_bytes=err.total - (len(stderr) - len(command_stderr)),
            isolation=self.isolation,
            uid=self.uid,
            budget_exceeded=self.budget_exceeded(mark) if mark is not None else "",
        )

    async def run_python(
        self,
        code: str,
        *,
        args: Sequence[str] = (),
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        limits: SandboxLimits | None = None,
        cwd: str | None = None,
    ) -> SandboxResult:
        """Run a Python program (read from stdin, so nothing is written into the work directory) with the
        project's interpreter (numpy, sympy and the venv's packages importable), unbuffered."""
        python = python or self.python
        if self.isolation == "rlimits" and self.uid is not None and not reachable_by_others(python):
            raise SandboxUnavailable(
                f"the interpreter {python} ({os.path.realpath(python)}) lies under a directory the sandbox uid cannot "
                "enter (e.g. /root is 0700): isolation='rlimits' sees the host's permissions; pass python= an "
                "interpreter every uid can run (e.g. /usr/bin/python3), or use isolation='bwrap'"
            )
        argv = [python, "-", *args]
        env = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        return await self.run(argv, input=code, env=env, timeout=timeout, limits=limits, cwd=cwd)

    async def spawn(
        self,
        command: Command,
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        limits: SandboxLimits | None = None,
        cwd: str | None = None,
        stdout_limit: int = 1 << 20,
        pass_fds: Sequence[int] = (),
    ) -> SandboxProcess:
        """Start one long-lived process in the sandbox (same argv, isolation, uid, limits and clean environment
        as :meth:`run`) and return at once with pipes to its stdin and stdout (stderr is kept, bounded, for
        diagnostics). The sandbox is busy while it lives: `run` and another `spawn` refuse. Its lifetime is
        bounded by ``limits.timeout_s`` (or `timeout`); when it ends, however it ends (exit, crash, lifetime,
        :meth:`SandboxProcess.kill`, a cancelled caller, :meth:`close`), the namespace is killed and the uid swept
        exactly as after a timed-out run, and the sandbox is free again. `stdout_limit` is the StreamReader's
        buffer limit (the longest line `readline` accepts; reading pauses when that much is unread)."""
        if isinstance(stdout_limit, bool) or not isinstance(stdout_limit, int) or stdout_limit < 1024:
            raise ValueError(f"stdout_limit must be an int >= 1024, got {stdout_limit!r}")
        if pass_fds and self.isolation == "docker":
            raise SandboxError("descriptors cannot be passed into a container (docker exec does not carry them)")
        await self._settle()
        argv, full_env, exec_cwd, limits, rlimits = await self._prepare(command, env=env, timeout=timeout, limits=limits, cwd=cwd)
        loop = asyncio.get_running_loop()
        exited = loop.create_future()
        self._busy = True
        fds = self._take_fds()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _ExitProtocol(exited, loop, limit=stdout_limit),
                *argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=full_env,
                cwd=exec_cwd,
                start_new_session=True,
                preexec_fn=self._preexec(rlimits),
                pass_fds=fds + tuple(pass_fds),
            )
        except BaseException as e:
            self._busy = False
            if isinstance(e, (OSError, subprocess.SubprocessError)):
                raise SandboxError(f"could not start the sandbox ({argv[0]}): {e}") from e
            raise
        finally:
            _close_all(fds)
        process = SandboxProcess(self, asyncio.subprocess.Process(transport, protocol, loop), transport, exited, limits)
        self._spawned = process
        return process

    def run_sync(self, command: Command, **kwargs) -> SandboxResult:
        return _run_coroutine(self.run(command, **kwargs))

    def run_python_sync(self, code: str, **kwargs) -> SandboxResult:
        return _run_coroutine(self.run_python(code, **kwargs))


class Sandbox(SandboxBase):
    """A work directory and a leased uid; `run` executes commands in it, one at a time.

    `workdir=None` creates a fresh directory under `base_dir` (default: the system temp dir) that `close()`
    removes. A caller's existing directory is chowned to the sandbox uid while the sandbox is open and chowned
    back to its previous owner by `close()` (never removed). Either way the caller (root) can read and remove
    whatever the sandbox wrote. `mount_at` binds the work directory at another path inside (bwrap only), e.g.
    "/workspace"; `ro_binds`/`rw_binds` add more paths (a path, or (host path, inside path))."""

    def __init__(
        self,
        workdir: str | os.PathLike | None = None,
        *,
        limits: SandboxLimits | None = None,
        isolation: str = "bwrap",
        env: Mapping[str, str] | None = None,
        base_dir: str | os.PathLike | None = None,
        mount_at: str | None = None,
        ro_binds: Sequence[Bind] = (),
        rw_binds: Sequence[Bind] = (),
        uid_pool: UidPool | None = None,
    ):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, got {isolation!r}")
        if isolation != "bwrap" and (mount_at or ro_binds or rw_binds):
            raise ValueError("mount_at, ro_binds and rw_binds need isolation='bwrap'")
        self.capability = require_capability(isolation)
        self.isolation = isolation
        self.limits = limits or SandboxLimits()
        self.env = dict(env or {})
        sandbox_env("/", self.env)  # validate early
        self.ro_binds, self.rw_binds = tuple(ro_binds), tuple(rw_binds)
        self._switch_uid = self.capability.root  # bwrap requires root; rlimits as root requires setpriv
        self._lease_uid(uid_pool, self._switch_uid)
        self._owned = workdir is None
        self._restore_owner: tuple[int, int] | None = None
        self._restore_mode = 0o700
        self._busy = False
        self._closed = False
        self._spawned: SandboxProcess | None = None  # the last process `spawn` started

        self.disk: sandbox_disk.CappedDirectory | None = None
        self.tmp: sandbox_disk.CappedTmp | None = None

        def undo() -> None:
            self._close_budgets()
            if self._owned and getattr(self, "path", None):
                fs_tree.remove_tree(self.path)

        with self._starting(undo):
            budgets = isolation == "bwrap" and self.capability.budgets
            if budgets:
                self.cgroup = cgroups.SandboxCgroup(self.limits.memory_budget, self.limits.process_budget,
                                                    self.limits.cpu_budget)
            if self._owned:
                base = os.fspath(base_dir) if base_dir is not None else tempfile.gettempdir()
                # absolute: bwrap binds it by path and refuses a relative one (a relative base_dir is fine)
                # the owner's pid in the name: a killed owner's disk is found and swept (sandbox_disk.sweep_stale)
                self.path = os.path.abspath(tempfile.mkdtemp(prefix=f"slime-sandbox-{os.getpid()}-", dir=base))
                if budgets:
                    self.disk = sandbox_disk.CappedDirectory(self.path, self.limits.disk_budget_bytes,
                                                             self.limits.file_budget)
            else:
                self.path = os.path.abspath(os.fspath(workdir))
                if not os.path.isdir(self.path):
                    raise SandboxError(f"work directory {self.path} does not exist")
                st = os.stat(self.path)
                self._restore_owner = (st.st_uid, st.st_gid)
                self._restore_mode = st.st_mode & 0o7777
            if budgets:  # /tmp: beside a work directory of ours, else in the caller's base or the system's temp dir
                where = self.path + ".tmp" if self._owned else tempfile.mkdtemp(
                    prefix=f"slime-sandbox-tmp-{os.getpid()}-", dir=os.fspath(base_dir) if base_dir is not None else None)
                self.tmp = sandbox_disk.CappedTmp(where, self.limits.tmp_size_bytes, self.limits.tmp_files)
            os.chmod(self.path, 0o700)
            if self.uid is not None and not fs_tree.chown_tree(self.path, self.uid, self.uid):
                raise SandboxError(f"could not give the work directory {self.path} to the sandbox uid {self.uid}")
        self.inner_path = os.path.abspath(mount_at) if mount_at else self.path
        _live_sandboxes.add(self)

    # -- lifecycle

    def close(self) -> None:
        """Remove the work directory (or give a caller's directory back) and release the uid. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _close_all(self._take_fds())
        try:
            spawned = self._kill_live_spawned(self._kill_tree)  # still alive: killed (and swept, below)
            if self.uid is not None and (self.isolation == "rlimits" or spawned is not None):
                _kill_uid_processes(self.uid)
            if self._owned:
                if self.disk is not None:
                    self.disk.close()  # what the sandbox wrote goes with its filesystem
                fs_tree.remove_tree(self.path)
            elif self._restore_owner is not None and os.path.isdir(self.path):
                # handed back: the owner's again, without a setuid/setgid or world-writable entry the agent made
                fs_tree.chown_tree(self.path, *self._restore_owner)
                fs_tree.strip_dangerous_modes(self.path)
                os.chmod(self.path, self._restore_mode)
        finally:
            try:
                self._close_budgets()
            finally:
                self._release_uid()

    def _close_budgets(self) -> None:
        """The group, the /tmp and the disk (before the work directory itself goes: unmounted, it is empty)."""
        if self.cgroup is not None:
            self.cgroup.close()
        if self.tmp is not None:
            self.tmp.close()
        if self.disk is not None:
            self.disk.close()

    def budget_exceeded(self, since: dict | None = None) -> str:
        """SandboxBase's, plus the disk: a work directory or /tmp that is full now."""
        problems = [super().budget_exceeded(since)]
        for where, capped in (("work directory", self.disk), ("/tmp", self.tmp)):
            if capped is not None and capped.mounted:
                spent = capped.usage().spent()
                if spent:
                    problems.append(f"{spent} in its {where}")
        return "; ".join(p for p in problems if p)

    # -- running

    def command_argv(self, command: Command, *, env: Mapping[str, str], limits: SandboxLimits, cwd: str | None = None,
                     seccomp_fd: int | None = None) -> list[str]:
        """The full argv this sandbox would execute for `command` (for logs and tests; `seccomp_fd`: the filter's
        descriptor of this start, bwrap mode)."""
        argv = shell_argv(command, env["PATH"]) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        if self.isolation == "bwrap":
            return build_bwrap_argv(
                argv,
                workdir=self.path,
                inner_workdir=self.inner_path,
                cwd=cwd,
                uid=self.uid,
                gid=self.uid,
                limits=limits,
                ro_binds=self.ro_binds,
                rw_binds=self.rw_binds,
                bwrap=self.capability.bwrap or "bwrap",
                setpriv=self.capability.setpriv or "setpriv",
                seccomp_fd=seccomp_fd,
                tmp_dir=self.tmp.path if self.tmp is not None else None,
            )
        if self.uid is not None:
            return setpriv_argv(self.uid, self.uid, self.capability.setpriv or "setpriv") + argv
        return argv

    async def _prepare(self, command: Command, *, env, timeout, limits, cwd):
        """(argv, env, exec cwd, limits, rlimits) for `command`: what `run` and `spawn` execute."""
        limits = self._begin(timeout, limits)
        if self.tmp is not None:  # every start gets an empty /tmp (what the last one left stays until now: its budget)
            await asyncio.to_thread(self.tmp.clear)
        full_env = sandbox_env(self.inner_path, {**self.env, **(env or {})})
        fd = seccomp.filter_fd() if self.isolation == "bwrap" and self.capability.seccomp else None
        try:
            argv = self.command_argv(command, env=full_env, limits=limits, cwd=cwd, seccomp_fd=fd)
        except BaseException:
            _close_all(() if fd is None else (fd,))
            raise
        _close_all(self._take_fds())  # a start that never happened (cancelled between _prepare and the exec)
        self._pending_fds = () if fd is None else (fd,)
        rlimits = limits.rlimits()
        if self.cgroup is not None:  # the group's process count binds first (and is counted: budget_exceeded)
            soft, hard = rlimits[resource.RLIMIT_NPROC]
            rlimits[resource.RLIMIT_NPROC] = (soft + NPROC_SLACK, hard if hard == resource.RLIM_INFINITY else hard + NPROC_SLACK)
        if self.isolation == "rlimits":
            if self.uid is None:
                # our own uid: RLIMIT_NPROC counts every process we already have, so allow that many more
                # RLIMIT_NPROC counts threads; reading /proc is blocking I/O: off the event loop
                n = sum(threads for *_, threads in await asyncio.to_thread(_scan_proc, [os.getuid()]))
                soft, hard = rlimits[resource.RLIMIT_NPROC]
                rlimits[resource.RLIMIT_NPROC] = (soft + n, hard + n) if hard != resource.RLIM_INFINITY else (soft + n, hard)
            logger.warning(
                "sandbox: isolation='rlimits' (opted in): NO network isolation and no private filesystem view; "
                "only rlimits, a clean environment, a process-group timeout%s apply (work dir %s)",
                f" and uid {self.uid}" if self.uid is not None else " (running as the caller's own uid)",
                self.path,
            )
        exec_cwd = "/" if self.isolation == "bwrap" else (os.path.join(self.path, cwd) if cwd else self.path)
        if self.capability.prlimit:  # else _execute sets them in a pre-exec hook
            argv = prlimit_argv(rlimits, self.capability.prlimit) + argv
        if self.cgroup is not None:  # first of all: everything the start runs is in the sandbox's group
            argv = self.cgroup.join_argv() + argv
        return argv, full_env, exec_cwd, limits, rlimits

    @property
    def _signal_statuses(self) -> bool:
        return self.isolation == "bwrap"

    def _preexec(self, rlimits):
        return None if self.capability.prlimit else functools.partial(_apply_rlimits, rlimits)

    def _after_exit(self, pid: int, timed_out: bool) -> None:
        if self.isolation == "rlimits":
            # whatever it left behind (a background child still holding the pipes, a setsid escapee)
            self._kill_tree(pid, False)
        elif not timed_out and self.uid is not None and _uid_has_processes_fast(self.uid):
            # the namespace is gone, but a process the kernel killed with it may still be finishing its exit: wait
            # for it, so that nothing of this uid is left when run() returns
            _kill_uid_processes(self.uid)

    def _kill_tree(self, pid: int, alive: bool = True) -> None:
        """SIGKILL the sandbox: bwrap's children (the pid namespace's init: the kernel then kills the whole
        namespace) while `pid` is still ours, its process group, then every remaining process of the uid."""
        for child in _children(pid) if alive else ():
            try:
                os.kill(child, _signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(pid, _signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # only while this sandbox still holds its uid: once released (close()), another sandbox may lease it again
        # and its processes are not ours to kill (a late kill() or lifetime end of a spawned process)
        if self.uid is not None and self.uid in self._pool.leased:
            _kill_uid_processes(self.uid)


class SandboxProcess:
    """A long-lived process started by :meth:`Sandbox.spawn`: ``stdin`` (an asyncio StreamWriter) and ``stdout``
    (an asyncio StreamReader) are its pipes. A supervisor task waits for it to end (or kills it when its lifetime
    passes), then kills whatever is left of the sandbox (the namespace, then every process of the uid) and frees
    the sandbox. Every byte it writes is the sandbox's: read ``stdout`` with a timeout and bounded lines."""

    def __init__(self, box: SandboxBase, proc: asyncio.subprocess.Process, transport, exited: asyncio.Future, limits: SandboxLimits):
        self.box = box
        self.pid = proc.pid
        self.limits = limits
        self.stdin: asyncio.StreamWriter = proc.stdin
        self.stdout: asyncio.StreamReader = proc.stdout
        self.timed_out = False  # the lifetime (limits.timeout_s) passed and it was killed
        self.killed = False  # kill() (or the sandbox's close()) ended it
        self._proc = proc
        self._transport = transport
        self._exited = exited
        self._stderr = OutputCapture(limits.max_output_bytes)
        self._stderr_task = asyncio.ensure_future(_pump(proc.stderr, self._stderr))
        self.started = time.monotonic()
        self._supervisor = asyncio.ensure_future(self._supervise())

    @property
    def returncode(self) -> int | None:
        """None while it runs; then the exit status (negative: killed by that signal). bubblewrap reports a child
        killed by signal N as 128 + N, and which of the two dies first when the sandbox is killed is a race: both
        read as -N, as `run` reads them."""
        rc = self._proc.returncode
        if rc is not None and self.box._signal_statuses and 128 < rc <= 128 + 64:
            return -(rc - 128)
        return rc

    @property
    def alive(self) -> bool:
        return not self._exited.done()

    @property
    def finished(self) -> bool:
        """The process is gone and the sandbox has been cleaned up and freed."""
        return self._supervisor.done()

    def stderr_text(self) -> str:
        """What it wrote to stderr so far (head and tail, invalid UTF-8 replaced)."""
        return self.box._command_stderr(self._stderr.text())

    async def _supervise(self) -> None:
        box = self.box
        try:
            try:
                await asyncio.wait_for(asyncio.shield(self._exited), self.limits.timeout_s)
            except TimeoutError:
                self.timed_out = True
                logger.warning("sandbox: spawned process %d passed its lifetime of %.0f s: killed", self.pid, self.limits.timeout_s)
                await asyncio.shield(box._cleanup_thread(box._kill_tree, self.pid))
                await self._exited
            if not box._closed:  # close() swept the uid itself before releasing it (it may be leased again now)
                # what it left behind (rlimits); what the namespace's end killed and is still exiting (bwrap)
                await asyncio.shield(box._cleanup_thread(box._after_exit, self.pid, False))
            try:
                self.stdin.close()
            except (BrokenPipeError, ConnectionResetError, RuntimeError):
                pass
            # let what it wrote last reach the readers (not forever: nobody may be reading stdout)
            drained = asyncio.ensure_future(self._proc.wait())
            await asyncio.wait([drained, self._stderr_task], timeout=_DRAIN_GRACE_S)
            drained.cancel()
        except BaseException:  # cancelled (the loop is shutting down): nothing may outlive it
            if not box._closed:
                try:
                    await box._kill_now(self.pid, self._proc.returncode is None)
                except (SandboxError, OSError):
                    pass
            raise
        finally:
            self._stderr_task.cancel()
            self._transport.close()  # what stdout already holds stays readable, then EOF
            box._busy = False

    async def wait(self) -> int:
        """Until it has ended and the sandbox is clean; the exit status."""
        await asyncio.shield(self._supervisor)
        return self.returncode

    async def kill(self) -> int:
        """SIGKILL it and everything it started (the namespace, then the uid's processes); returns once the
        sandbox is free. Idempotent."""
        if self.alive:
            self.killed = True
            await asyncio.shield(self.box._cleanup_thread(self.box._kill_tree, self.pid))
        return await self.wait()

    aclose = kill

    async def __aenter__(self) -> SandboxProcess:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.kill()


_live_sandboxes: weakref.WeakSet[SandboxBase] = weakref.WeakSet()


@atexit.register
def _close_live_sandboxes() -> None:
    """A process that exits without closing its sandboxes (an exception, a forgotten close) still removes their
    work directories and gives a caller's directory back."""
    for box in list(_live_sandboxes):
        try:
            box.close()
        except Exception as e:  # best effort at exit
            logger.debug("sandbox: close at exit failed: %s", e)


class _ExitProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's own subprocess protocol, plus a future set when the process exits (not when its pipes close:
    a background child may hold them open)."""

    def __init__(self, exited: asyncio.Future, loop: asyncio.AbstractEventLoop, limit: int = _READ_CHUNK):
        super().__init__(limit=limit, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        super().process_exited()
        if not self._exited.done():
            self._exited.set_result(None)


async def _pump(stream: asyncio.StreamReader, capture: OutputCapture) -> None:
    while True:
        chunk = await stream.read(_READ_CHUNK)
        if not chunk:
            return
        capture.feed(chunk)


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    try:
        stream.write(data)
        await stream.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        try:
            stream.close()
        except (BrokenPipeError, ConnectionResetError):
            pass


def _run_coroutine(coro):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside an event loop's thread
        return pool.submit(asyncio.run, coro).result()


# ------------------------------------------------------------------------------------------------ one shot


_SANDBOX_KEYS = ("limits", "isolation", "base_dir", "mount_at", "ro_binds", "rw_binds", "uid_pool")


def _split(kwargs: dict) -> tuple[dict, dict]:
    box = {k: kwargs.pop(k) for k in _SANDBOX_KEYS if k in kwargs}
    return box, kwargs


def capped_work_directory(path: str | os.PathLike, limits: SandboxLimits | None = None) -> sandbox_disk.CappedDirectory | None:
    """`path` (made here; it must not exist) as a filesystem of its own with the limits' disk and file budgets, for a
    caller that fills a work directory before lending it (`Sandbox(path)`: a SWE checkout), where bwrap sandboxes
    keep budgets; else a plain directory and None. The caller closes what it gets after the sandbox."""
    limits = limits or SandboxLimits()
    os.mkdir(path, 0o755)
    capability = detect_capability("bwrap")
    if not (capability.available and capability.budgets):
        return None
    return sandbox_disk.CappedDirectory(path, limits.disk_budget_bytes, limits.file_budget)


async def run(command: Command, **kwargs) -> SandboxResult:
    """One shot: a fresh sandbox (Sandbox keyword arguments accepted), the command, then everything removed."""
    box_kwargs, run_kwargs = _split(dict(kwargs))
    box = await asyncio.to_thread(Sandbox, **box_kwargs)
    try:
        return await box.run(command, **run_kwargs)
    finally:
        await box.aclose()


async def run_python(code: str, **kwargs) -> SandboxResult:
    """One shot: `code` in a fresh Python in a fresh sandbox, then everything removed."""
    box_kwargs, run_kwargs = _split(dict(kwargs))
    box = await asyncio.to_thread(Sandbox, **box_kwargs)
    try:
        return await box.run_python(code, **run_kwargs)
    finally:
        await box.aclose()


def run_sync(command: Command, **kwargs) -> SandboxResult:
    return _run_coroutine(run(command, **kwargs))


def run_python_sync(code: str, **kwargs) -> SandboxResult:
    return _run_coroutine(run_python(code, **kwargs))


__all__ = [
    "Capability",
    "OutputCapture",
    "Sandbox",
    "SandboxBase",
    "SandboxBusy",
    "SandboxError",
    "SandboxLimits",
    "SandboxProcess",
    "SandboxResult",
    "SandboxUnavailable",
    "UidPool",
    "build_bwrap_argv",
    "capped_work_directory",
    "default_uid_pool",
    "detect_capability",
    "interpreter_dirs",
    "prlimit_argv",
    "reachable_by_others",
    "require_capability",
    "run",
    "run_python",
    "run_python_sync",
    "run_sync",
    "sandbox_env",
    "shell_argv",
    "uid_processes",
]
