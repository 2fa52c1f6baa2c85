"""Whole-sandbox budgets: memory, process count and CPU for all of a sandbox's processes together, with control
groups (issue 37). The rlimits of :class:`slime.agentic.sandbox.SandboxLimits` stay as a second line; they are per
process (RLIMIT_AS, RLIMIT_CPU) or per uid (RLIMIT_NPROC), so forty processes of 2 GiB each, or a fork chain that
stays under the per-process limits, got past them.

One group per sandbox, created by root below the creating process's own group (so a limit of the caller's still
applies above it), in each controller's hierarchy:

* **cgroup v2** (a unified hierarchy whose ``cgroup.controllers`` lists memory and pids): ``memory.max``,
  ``memory.swap.max`` 0, ``pids.max``, ``cpu.max`` (and ``cpu.max.burst``); events from ``memory.events`` (``oom_kill``) and
  ``pids.events`` (``max``).
* **cgroup v1** (the memory, pids and cpu hierarchies mounted separately, as on this machine):
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted), ``pids.max``,
  ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (and ``cpu.cfs_burst_us``); events from ``memory.oom_control`` (``oom_kill``) and
  ``pids.events`` (``max``).

A command joins the group before anything of it runs: the exec chain starts with ``sh -c 'echo $$ > .../cgroup.procs
...; exec "$@"'`` (:meth:`SandboxCgroup.join_argv`), so every process it starts is in the group from its first
instruction. Going over the memory budget makes the kernel kill a process of the group (an OOM kill, counted);
reaching the process budget makes fork fail (counted); the CPU budget throttles. The CPU budget may be spent in
bursts (up to one period's quota saved from periods the sandbox left idle, where the kernel has CFS burst, 5.14+): a
sandbox mostly waits for its model, and without it a test run that starts a few processes at once was throttled for
tens of milliseconds (2-3 times an episode here) while averaging well under its budget. :meth:`SandboxCgroup.exceeded`
compares the counters with what they were and says which budget was hit, in words.

Groups are named ``slime-sandbox-<owner pid>-<random>``: :func:`sweep_stale` removes the empty groups of owners that
are gone (a killed process never runs ``close``), never a live owner's, which is empty between its commands.

:func:`detect` says what this host supports; where neither version is usable the sandbox refuses to start unless
the user opts into the weaker per-process guarantee (``SLIME_SANDBOX_BUDGETS=off``, logged by name).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
BUDGETS_ENV = "SLIME_SANDBOX_BUDGETS"  # "off": per-process rlimits only (a weaker, logged guarantee)
CPU_PERIOD_US = 100_000
_V1_CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class CgroupSupport:
    version: int | None  # 2, 1, or None when no usable hierarchy was found
    problem: str = ""  # why not, when version is None
    parents: tuple[tuple[str, str], ...] = ()  # (controller or "unified", the directory new groups go under)
    swap_accounting: bool = False  # v1: memory.memsw.* exists


def _own_group(controller: str) -> str:
    """This process's group in `controller`'s v1 hierarchy ("" for v2), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
        if controller == "" and controllers == "":
            return path
    return "/"


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


@functools.lru_cache(maxsize=None)
def detect(root: str = str(CGROUP_ROOT)) -> CgroupSupport:
    """What this host offers (cached): v2 with the memory and pids controllers enabled for our group's children,
    else v1's memory, pids and cpu hierarchies, writable by us."""
    base = Path(root)
    if os.geteuid() != 0:
        return CgroupSupport(None, "control groups need root (the sandbox runs as root)")
    for unified in (base, base / "unified"):
        controllers = unified / "cgroup.controllers"
        if controllers.is_file():
            here = unified / _own_group("").lstrip("/")
            have = set((here / "cgroup.controllers").read_text().split()) if (here / "cgroup.controllers").is_file() else set()
            if {"memory", "pids"} <= have and _writable_dir(here):
                return CgroupSupport(2, parents=(("unified", str(here)),))
    parents = []
    for controller in _V1_CONTROLLERS:
        mount = base / controller
        if not (mount / "cgroup.procs").is_file():
            return CgroupSupport(None, f"no cgroup v2 with the memory and pids controllers, and no cgroup v1 {controller} "
                                       f"hierarchy at {mount}")
        here = mount / _own_group(controller).lstrip("/")
        if not _writable_dir(here):
            return CgroupSupport(None, f"the cgroup v1 {controller} group {here} is not writable")
        parents.append((controller, str(here)))
    memsw = (Path(dict(parents)["memory"]) / "memory.memsw.limit_in_bytes").exists()
    return CgroupSupport(1, parents=tuple(parents), swap_accounting=memsw)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read_counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class _Counters:
    """What a group's counters say: `dirs` (controller or "unified" -> directory), `version`, and the budgets it was
    given (for the words)."""

    dirs: dict
    version: int | None
    memory_bytes: int
    processes: int
    _baseline: dict

    def events(self) -> dict[str, int]:
        """Counters since the group was made: OOM kills, forks refused at the process budget."""
        if self.version == 2:
            d = self.dirs.get("unified")
            if d is None:
                return {"oom_kill": 0, "pids_max": 0}
            return {"oom_kill": _read_counter(d / "memory.events", "oom_kill"),
                    "pids_max": _read_counter(d / "pids.events", "max")}
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        return {"oom_kill": _read_counter(memory / "memory.oom_control", "oom_kill") if memory else 0,
                "pids_max": _read_counter(pids / "pids.events", "max") if pids else 0}

    def exceeded(self, since: dict[str, int] | None = None) -> str:
        """Which budget was hit since `since` (default: since the group was made), in words; "" when none."""
        before, now = since or self._baseline, self.events()
        problems = []
        if now["oom_kill"] > before.get("oom_kill", 0):
            problems.append(f"went over its memory budget ({self.memory_bytes >> 20} MiB for all its processes "
                            f"together): the kernel killed {now['oom_kill'] - before.get('oom_kill', 0)} process(es)")
        if now["pids_max"] > before.get("pids_max", 0):
            problems.append(f"reached its process budget ({self.processes} processes and threads together): "
                            f"{now['pids_max'] - before.get('pids_max', 0)} fork(s) refused")
        return "; ".join(problems)


class ContainerCgroup(_Counters):
    """The group Docker made for a container, read on the host (cgroupfs driver: ``<hierarchy>/docker/ID``; systemd
    driver: ``.../system.slice/docker-ID.scope``): its OOM kills and refused forks, as for a sandbox of ours. None of
    it where the daemon's groups are not on this host (a remote daemon): :meth:`find` returns None then."""

    def __init__(self, dirs: dict, version: int, memory_bytes: int, processes: int):
        self.dirs, self.version = dirs, version
        self.memory_bytes, self.processes = int(memory_bytes), int(processes)
        self._baseline = self.events()

    @classmethod
    def find(cls, container_id: str, memory_bytes: int, processes: int, root: str = str(CGROUP_ROOT)) -> ContainerCgroup | None:
        base = Path(root)
        names = (Path("docker") / container_id, Path("system.slice") / f"docker-{container_id}.scope")
        for unified in (base, base / "unified"):
            for name in names:
                if (unified / name / "memory.events").is_file():
                    return cls({"unified": unified / name}, 2, memory_bytes, processes)
        dirs = {}
        for controller in ("memory", "pids"):
            found = [base / controller / name for name in names if (base / controller / name / "cgroup.procs").is_file()]
            if not found:
                return None
            dirs[controller] = found[0]
        return cls(dirs, 1, memory_bytes, processes)


class SandboxCgroup(_Counters):
    """The group of one sandbox (module docstring). `memory_bytes`, `processes`, `cpus`: the budgets."""

    def __init__(self, memory_bytes: int, processes: int, cpus: float, *, support: CgroupSupport | None = None,
                 name: str | None = None):
        self.support = support or detect()
        if self.support.version is None:
            raise OSError(f"no usable control groups: {self.support.problem}")
        self.memory_bytes, self.processes, self.cpus = int(memory_bytes), int(processes), float(cpus)
        self.name = name or f"slime-sandbox-{os.getpid()}-{secrets.token_hex(6)}"  # the owner's pid: sweep_stale
        self.dirs: dict[str, Path] = {}
        self.version = self.support.version
        try:
            for controller, parent in self.support.parents:
                path = Path(parent) / self.name
                path.mkdir(mode=0o755)
                self.dirs[controller] = path
            self._set_limits()
        except BaseException:
            self.close()
            raise
        self._baseline = self.events()

    def _set_limits(self) -> None:
        quota = max(1000, int(self.cpus * CPU_PERIOD_US))
        if self.support.version == 2:
            d = self.dirs["unified"]
            _write(d / "memory.max", str(self.memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(self.processes))
            if (d / "cpu.max").exists():
                _write(d / "cpu.max", f"{quota} {CPU_PERIOD_US}")
                if (d / "cpu.max.burst").exists():
                    _write(d / "cpu.max.burst", str(quota))
            return
        _write(self.dirs["memory"] / "memory.limit_in_bytes", str(self.memory_bytes))
        if self.support.swap_accounting:
            _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(self.memory_bytes))
        _write(self.dirs["pids"] / "pids.max", str(self.processes))
        _write(self.dirs["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
        _write(self.dirs["cpu"] / "cpu.cfs_quota_us", str(quota))
        if (self.dirs["cpu"] / "cpu.cfs_burst_us").exists():
            _write(self.dirs["cpu"] / "cpu.cfs_burst_us", str(quota))

    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def join_argv(self) -> list[str]:
        """The head of an exec chain that puts itself (and so all it starts) into the group, then execs the rest."""
        script = "for f do [ \"$f\" = -- ] && break; echo $$ > \"$f\" || exit 125; shift; done; shift; exec \"$@\""
        return ["/bin/sh", "-c", script, "slime-cgroup", *self.procs_files(), "--"]

    def members(self) -> list[int]:
        out: set[int] = set()
        for d in self.dirs.values():
            try:
                out.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except OSError:
                pass
        return sorted(out)

    def close(self) -> None:
        """Remove the group (its processes must be gone: the sandbox kills them first). Idempotent; a group that
        cannot be removed yet is logged and left (the kernel frees it once empty and removed later)."""
        for controller, d in list(self.dirs.items()):
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError as e:
                logger.warning("sandbox cgroup %s (%s): cannot remove it: %s", d, controller, e)
                continue
            del self.dirs[controller]


OWNED_NAME = re.compile(r"slime-sandbox-(?:tmp-)?(\d+)-")  # the owner's pid in a group's or a sandbox path's name


def owner_gone(name: str) -> bool:
    """Whether `name` carries the pid of its owner (OWNED_NAME) and that process is gone: only then is what the name
    belongs to a crashed owner's leftover (a live owner's group is empty between its commands)."""
    m = OWNED_NAME.match(name)
    return m is not None and not os.path.exists(f"/proc/{m[1]}")


def sweep_stale() -> int:
    """Remove the empty groups of sandboxes whose owner process is gone (killed: its close() never ran); returns
    how many. Groups of live owners, and names without an owner's pid, are left."""
    support = detect()
    removed = 0
    for _, parent in support.parents:
        for child in Path(parent).glob("slime-sandbox-*"):
            try:
                if owner_gone(child.name) and not (child / "cgroup.procs").read_text().split():
                    child.rmdir()
                    removed += 1
            except OSError:
                pass
    return removed


__all__ = ["BUDGETS_ENV", "OWNED_NAME", "CgroupSupport", "ContainerCgroup", "SandboxCgroup", "detect", "owner_gone",
           "sweep_stale"]
