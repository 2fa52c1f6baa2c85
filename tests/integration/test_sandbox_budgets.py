"""Whole-sandbox budgets (issue 37): memory, processes and CPU for all of a sandbox's processes together (a control
group each), its work directory's bytes and files (an ext4 of its own) and its /tmp's files (a tmpfs with a file
count). Each is tried as an agent would; the run reports which budget it hit, the host stays usable, the sandbox
runs again, and nothing is left after close (no mount, no group, no image)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from slime.agentic import cgroups, fs_tree
from slime.agentic import sandbox as sb
from slime.agentic.sandbox import Sandbox, SandboxLimits

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not (_CAP.available and _CAP.budgets),
                                reason=f"no bwrap sandbox with budgets here: {_CAP.problem or 'budgets off'}")


def run(box, command, timeout=60):
    return asyncio.run(box.run(command, timeout=timeout))


def leftovers(box) -> list[str]:
    left = [p for p in (box.path, box.path + ".disk", box.path + ".tmp") if os.path.lexists(p)]
    left += fs_tree.mounts_below(box.path) + fs_tree.mounts_below(box.path + ".tmp")
    left += [str(d) for d in (box.cgroup.dirs.values() if box.cgroup else ()) if d.exists()]
    return left


def test_memory_spread_over_many_processes_is_held_to_one_budget(tmp_path):
    # 8 processes of 100 MB each: every one is far below the per-process limit (2 GiB), together over 256 MiB
    hog = "python3 -c 'import time; b = bytearray(100 << 20); b[::4096] = bytes(len(b[::4096])); time.sleep(3)'"
    box = Sandbox(base_dir=tmp_path, limits=SandboxLimits(memory_budget_bytes=256 << 20))
    try:
        r = run(box, f"for i in $(seq 8); do {hog} & done; wait; echo finished")
        assert "went over its memory budget (256 MiB" in r.budget_exceeded, r
        assert "Killed" in r.stderr
        again = run(box, "echo still here")
        assert again.ok and again.stdout == "still here\n" and again.budget_exceeded == ""  # per run
        assert "memory budget" in box.budget_exceeded()  # since the start
    finally:
        box.close()
    assert leftovers(box) == []


def test_a_process_flood_reaches_the_process_budget_not_the_host(tmp_path):
    box = Sandbox(base_dir=tmp_path, limits=SandboxLimits(max_processes=24))
    try:
        r = run(box, "for i in $(seq 200); do sleep 5 & done; wait", timeout=30)
        assert "reached its process budget (26 processes" in r.budget_exceeded, r
        assert run(box, "true").ok
    finally:
        box.close()
    assert leftovers(box) == []


def test_the_cpu_budget_holds_busy_processes_to_their_share(tmp_path):
    # two busy processes for 1.5 s of wall time with a budget of a quarter of a CPU: ~0.4 s of CPU between them
    busy = ("python3 -c 'import os, time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass\n"
            "t = os.times(); print(t.user + t.system)'")
    box = Sandbox(base_dir=tmp_path, limits=SandboxLimits(cpu_budget=0.25))
    try:
        r = run(box, f"{busy} & {busy} & wait")
        used = sum(float(x) for x in r.stdout.split())
        assert r.ok and used < 0.25 * 1.5 * 1.6, (used, r)  # a loose bound (scheduler granularity), far below 3.0 s
    finally:
        box.close()


def test_the_work_directory_has_a_disk_and_a_file_budget(tmp_path):
    limits = SandboxLimits(disk_budget_bytes=64 << 20, file_budget=2000)
    box = Sandbox(base_dir=tmp_path, limits=limits)
    try:
        r = run(box, "head -c 200M /dev/zero > big; echo rc=$?")
        assert "rc=1" in r.stdout and "No space left on device" in r.stderr
        assert "filled its disk budget" in r.budget_exceeded, r
        assert os.path.getsize(box.path + ".disk") == 64 << 20  # on the host: one image of the budget's size
        r = run(box, "rm big; mkdir d; cd d; for i in $(seq 5000); do : > f$i || break; done; echo made $i")
        made = int(r.stdout.split()[-1])
        assert 1900 < made < 2000 and "used up its file budget" in r.budget_exceeded, r
        assert run(box, "rm -rf d && echo ok").stdout == "ok\n"  # freed: the budget is the sandbox's to reuse
        assert box.budget_exceeded() == ""
    finally:
        box.close()
    assert leftovers(box) == []


def test_the_private_tmp_has_a_file_budget_and_is_empty_for_every_run(tmp_path):
    box = Sandbox(base_dir=tmp_path, limits=SandboxLimits(tmp_files=300))
    try:
        r = run(box, "cd /tmp && for i in $(seq 1000); do : > t$i || break; done; echo made $i")
        assert int(r.stdout.split()[-1]) < 300 and "in its /tmp" in r.budget_exceeded, r
        r = run(box, "ls -A /tmp | grep -c '^t[0-9]'")  # (bwrap's mount points for the work dir's path may show)
        assert r.stdout.strip() == "0"
    finally:
        box.close()
    assert leftovers(box) == []


def test_a_crashed_owners_mounts_go_with_the_tree_that_holds_them(tmp_path):
    lease = tmp_path / "lease"
    lease.mkdir()
    box = Sandbox(base_dir=lease)
    run(box, "echo x > f")
    # the owner dies here: nothing of close() runs; the sweep of the lease directory must still take everything
    assert fs_tree.mounts_below(lease)
    box.cgroup.close()  # (the group is swept by its dead owner's pid: the next test)
    assert fs_tree.remove_tree(lease)
    assert not lease.exists() and fs_tree.mounts_below(tmp_path) == []
    box.disk.mounted = box.tmp.mounted = False
    box._closed = True
    box._release_uid()


KILLED_OWNER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from slime.agentic.sandbox import Sandbox
own = Sandbox(base_dir=sys.argv[2])                # a work directory of its own: its disk and /tmp
lent = os.path.join(sys.argv[2], "lent")
os.mkdir(lent)
theirs = Sandbox(lent)                               # a caller's directory: its /tmp in $TMPDIR
own.run_sync("echo x > f")
print(own.path, theirs.tmp.path, *[str(d) for d in own.cgroup.dirs.values()], flush=True)
os.kill(os.getpid(), signal.SIGKILL)                 # no close(), no atexit
"""


def test_what_a_killed_owner_leaves_is_swept_by_the_next_process(tmp_path):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", KILLED_OWNER, str(repo / "slime"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    own_path, tmp_mount, *groups = proc.stdout.split()
    assert own_path in fs_tree.mounts_below(own_path) and fs_tree.mounts_below(tmp_mount), proc.stderr
    assert all(Path(g).is_dir() for g in groups)
    # a live owner's group is empty between its commands: it must be left alone
    live = cgroups.SandboxCgroup(64 << 20, 8, 1.0)
    try:
        assert cgroups.sweep_stale() >= len(groups) and sb.sandbox_disk.sweep_stale() >= 3
        assert not any(Path(g).exists() for g in groups) and all(d.exists() for d in live.dirs.values())
        assert fs_tree.mounts_below(own_path) == fs_tree.mounts_below(tmp_mount) == []
        assert not os.path.exists(own_path + ".disk") and not os.path.exists(tmp_mount)
    finally:
        live.close()
    first, count = sb.DEFAULT_UID_RANGE  # and the killed owner's commands ended with their namespaces
    assert sb.uid_processes(range(first, first + count)) == []


def test_without_control_groups_the_sandbox_refuses_unless_the_user_opts_out(monkeypatch, caplog):
    monkeypatch.setattr(cgroups, "detect", lambda root="": cgroups.CgroupSupport(None, "no cgroup here"))
    monkeypatch.delenv(cgroups.BUDGETS_ENV, raising=False)
    problem, kept = sb._probe_budgets()
    assert not kept and "no cgroup here" in problem and f"{cgroups.BUDGETS_ENV}=off" in problem
    monkeypatch.setenv(cgroups.BUDGETS_ENV, "off")
    with caplog.at_level("WARNING"):
        problem, kept = sb._probe_budgets()
    assert (problem, kept) == ("", False) and "only the per-process rlimits apply" in caplog.text


def _loop_devices() -> set[str]:
    return {d for d in os.listdir("/sys/block") if d.startswith("loop") and os.path.exists(f"/sys/block/{d}/loop/backing_file")}


def test_disks_made_from_one_formatted_image_are_each_their_own_and_free_their_loop_devices(tmp_path):
    """The ext4 image is formatted once per budget and copied (sandbox_disk): two sandboxes of the same budget see
    only their own files, each has the whole budget, and closing them leaves no loop device attached."""
    from slime.agentic import sandbox_disk

    before = _loop_devices()
    limits = SandboxLimits(disk_budget_bytes=48 << 20, file_budget=500)
    a, b = Sandbox(base_dir=tmp_path, limits=limits), Sandbox(base_dir=tmp_path, limits=limits)
    try:
        assert run(a, "echo mine > only-a && echo ok").stdout == "ok\n"
        assert run(a, "ls -A").stdout == "only-a\n" and run(b, "ls -A").stdout == ""
        # mkfs rounds the file count to whole block groups
        assert sandbox_disk.usage(b.path).files_total == sandbox_disk.usage(a.path).files_total >= 400
        assert len(_loop_devices() - before) == 2
        assert sandbox_disk._formatted_ext4.cache_info().currsize >= 1
    finally:
        a.close()
        b.close()
    assert _loop_devices() - before == set() and leftovers(a) == leftovers(b) == []
