"""The sandbox's pure parts: argv construction, head/tail truncation, limits validation, the uid pool, the clean
environment and the capability messages (nothing here starts a sandbox)."""

from __future__ import annotations

import os
import resource
import sys

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.sandbox import OutputCapture, SandboxBusy, SandboxLimits, SandboxUnavailable, UidPool


# ---------------------------------------------------------------------------------------------- truncation


def test_output_capture_keeps_everything_up_to_the_limit():
    cap = OutputCapture(10)
    cap.feed(b"abc")
    cap.feed(b"defghij")
    assert (cap.getvalue(), cap.total, cap.truncated, cap.omitted) == (b"abcdefghij", 10, False, 0)
    assert cap.text() == "abcdefghij"


def test_output_capture_keeps_head_and_tail_and_counts_the_rest():
    cap = OutputCapture(10)  # head 5, tail 5
    data = bytes(range(65, 65 + 26))  # A..Z
    for i in range(0, len(data), 3):  # odd chunk sizes across the head/tail boundary
        cap.feed(data[i : i + 3])
    assert cap.total == 26 and cap.truncated and cap.omitted == 16
    assert bytes(cap.head) == b"ABCDE" and cap.tail == b"VWXYZ"
    assert cap.getvalue() == b"ABCDEVWXYZ"
    assert cap.text() == "ABCDE\n[... 16 bytes truncated (26 in all) ...]\nVWXYZ"


def test_output_capture_odd_limit_and_one_big_chunk():
    cap = OutputCapture(7)  # head 4, tail 3
    cap.feed(b"0123456789")
    assert bytes(cap.head) == b"0123" and cap.tail == b"789" and cap.omitted == 3


def test_output_capture_memory_is_bounded_whatever_is_fed():
    cap = OutputCapture(1000)
    chunk = b"x" * 65536
    for _ in range(300):  # ~20 MB
        cap.feed(chunk)
        assert len(cap.head) + len(cap._tail) <= 1000 + 2 * 500 + 2 * 65536
    assert cap.total == 300 * 65536 and len(cap.getvalue()) == 1000


def test_output_capture_invalid_utf8_is_replaced_not_raised():
    cap = OutputCapture(100)
    cap.feed(b"ok \xff\xfe end")
    assert cap.text() == "ok \ufffd\ufffd end"
    with pytest.raises(ValueError):
        OutputCapture(1)


# ---------------------------------------------------------------------------------------------- limits


def test_limits_defaults_are_sane():
    lim = SandboxLimits()
    assert lim.timeout_s > 0 and lim.memory_bytes >= 256 << 20 and 1 <= lim.max_processes <= 1024
    assert lim.max_output_bytes >= 1024 and lim.open_files >= 64


@pytest.mark.parametrize(
    "kwargs",
    [
        {"timeout_s": 0},
        {"timeout_s": -1},
        {"cpu_seconds": 0},
        {"memory_bytes": 1 << 20},  # below 32 MiB: nothing would start
        {"max_processes": 0},
        {"open_files": 3},
        {"max_output_bytes": 1},
        {"file_size_bytes": 1.5},
        {"max_processes": True},
        {"tmp_size_bytes": "1G"},
    ],
)
def test_limits_validation_rejects(kwargs):
    with pytest.raises(ValueError):
        SandboxLimits(**kwargs)


def test_limits_rlimits_mapping_and_lowering_to_the_callers_hard_limits():
    lim = SandboxLimits(cpu_seconds=5, memory_bytes=1 << 30, max_processes=10, file_size_bytes=1 << 20, open_files=5000)
    inf = resource.RLIM_INFINITY
    hard = {r: inf for r in (resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE)}
    hard[resource.RLIMIT_NOFILE] = 1024  # the caller cannot raise beyond its own hard limit
    rl = lim.rlimits(hard)
    assert rl[resource.RLIMIT_CPU] == (5, 6)  # SIGXCPU at 5 s, SIGKILL at 6 s
    assert rl[resource.RLIMIT_AS] == (1 << 30, 1 << 30)
    assert rl[resource.RLIMIT_NPROC] == (10, 10)
    assert rl[resource.RLIMIT_FSIZE] == (1 << 20, 1 << 20)
    assert rl[resource.RLIMIT_NOFILE] == (1024, 1024)
    assert rl[resource.RLIMIT_CORE] == (0, 0)


# ---------------------------------------------------------------------------------------------- uid pool


def test_uid_pool_leases_distinct_uids_and_reports_exhaustion(tmp_path):
    pool = UidPool(30000, 3, lock_dir=str(tmp_path))
    uids = [pool.acquire() for _ in range(3)]
    assert sorted(uids) == [30000, 30001, 30002] and pool.leased == frozenset(uids)
    with pytest.raises(SandboxBusy, match="30000-30002"):
        pool.acquire()
    pool.release(uids[1])
    assert pool.acquire() == uids[1]
    for u in uids:
        pool.release(u)
    assert pool.leased == frozenset()


def test_uid_pool_is_exclusive_across_pools_sharing_a_lock_dir(tmp_path):
    a, b = UidPool(30000, 2, lock_dir=str(tmp_path)), UidPool(30000, 2, lock_dir=str(tmp_path))
    ua, ub = a.acquire(), b.acquire()
    assert ua != ub  # a flock per uid: another process (or pool) cannot take a leased uid
    with pytest.raises(SandboxBusy):
        b.acquire()
    a.release(ua)
    assert b.acquire() == ua


def test_uid_pool_rotates_so_a_released_uid_is_reused_last(tmp_path):
    pool = UidPool(30000, 4, lock_dir=str(tmp_path))
    first = pool.acquire()
    pool.release(first)
    assert [pool.acquire() for _ in range(3)] == [30001, 30002, 30003]
    assert pool.acquire() == first


def test_uid_pool_validation_and_range_parsing(monkeypatch):
    with pytest.raises(ValueError, match=">= 1000"):
        UidPool(0, 10)
    with pytest.raises(ValueError):
        UidPool(20000, 0)
    assert UidPool.parse_range("20000-20999") == (20000, 1000)
    assert UidPool.parse_range(" 25000-25000 ") == (25000, 1)
    for bad in ("20000", "a-b", "20999-20000"):
        with pytest.raises(ValueError):
            UidPool.parse_range(bad)
    monkeypatch.setenv(sb.UID_RANGE_ENV, "40000-40009")
    pool = UidPool.from_env()
    assert (pool.first, pool.count) == (40000, 10)


# ---------------------------------------------------------------------------------------------- argv


def _pairs(argv, flag):
    return [tuple(argv[i + 1 : i + 3]) for i, a in enumerate(argv) if a == flag]


def test_bwrap_argv_namespaces_mounts_and_privilege_drop():
    argv = sb.build_bwrap_argv(
        ["python", "-c", "pass"],
        workdir="/tmp/box1",
        uid=20007,
        gid=20007,
        limits=SandboxLimits(tmp_size_bytes=64 << 20),
        interpreter=("/home/u/.pyenv/versions/3.11.7", "/srv/project/.venv"),  # private paths, as a root-owned install has
        bwrap="/usr/bin/bwrap",
        setpriv="/usr/bin/setpriv",
    )
    assert argv[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert "--unshare-user" not in argv and "--unshare-all" not in argv  # root maps to root: use setpriv instead
    assert ("/usr", "/usr") in _pairs(argv, "--ro-bind") and ("/etc", "/etc") in _pairs(argv, "--ro-bind")
    assert ("/home/u/.pyenv/versions/3.11.7", "/home/u/.pyenv/versions/3.11.7") in _pairs(argv, "--ro-bind")
    assert ("/srv/project/.venv", "/srv/project/.venv") in _pairs(argv, "--ro-bind")
    assert _pairs(argv, "--bind") == [("/tmp/box1", "/tmp/box1")]  # the only writable host path
    # the interpreter's private parents are made traversable, each once, before its bind
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--dir"]
    assert dirs == ["/home", "/home/u", "/home/u/.pyenv", "/home/u/.pyenv/versions", "/srv", "/srv/project"]
    for d in dirs:
        i = argv.index(d)
        assert argv[i - 3 : i - 1] == ["--perms", "0755"]
    assert argv.index("--tmpfs") < argv.index("/tmp/box1")  # /tmp first, then the work dir on top of it
    i = argv.index("--tmpfs")
    assert argv[i - 4 : i + 2] == ["--perms", "1777", "--size", str(64 << 20), "--tmpfs", "/tmp"]
    assert argv[argv.index("--chdir") + 1] == "/tmp/box1"
    sep = argv.index("--")
    assert argv[sep + 1 :] == [
        "/usr/bin/setpriv", "--reuid=20007", "--regid=20007", "--clear-groups", "--inh-caps=-all",
        "--bounding-set=-all", "--no-new-privs", "--", "python", "-c", "pass",
    ]  # fmt: skip
    assert "--setenv" not in argv and "--clearenv" not in argv  # the environment never appears on a command line


def test_bwrap_argv_mount_at_cwd_and_extra_binds():
    argv = sb.build_bwrap_argv(
        ["ls"],
        workdir="/tmp/box2",
        inner_workdir="/workspace",
        cwd="src",
        uid=20001,
        gid=20001,
        limits=SandboxLimits(),
        interpreter=(),
        ro_binds=["/opt/data", ("/srv/x", "/mnt/x")],
        rw_binds=[("/tmp/.X11-unix", "/tmp/.X11-unix")],
    )
    assert ("/tmp/box2", "/workspace") in _pairs(argv, "--bind")
    assert ("/tmp/.X11-unix", "/tmp/.X11-unix") in _pairs(argv, "--bind")
    assert ("/opt/data", "/opt/data") in _pairs(argv, "--ro-bind") and ("/srv/x", "/mnt/x") in _pairs(argv, "--ro-bind")
    assert argv[argv.index("--chdir") + 1] == "/workspace/src"
    with pytest.raises(ValueError):
        sb.build_bwrap_argv([], workdir=None, uid=1, gid=1, limits=SandboxLimits(), interpreter=())


def test_prlimit_argv_sets_every_rlimit_before_the_exec_chain():
    rl = SandboxLimits(cpu_seconds=5, memory_bytes=1 << 30, max_processes=10, open_files=64).rlimits(
        {r: resource.RLIM_INFINITY for r in sb._PRLIMIT_NAMES}
    )
    argv = sb.prlimit_argv(rl, "/usr/bin/prlimit")
    assert argv[0] == "/usr/bin/prlimit" and argv[-1] == "--"
    assert set(argv[1:-1]) == {
        "--cpu=5:6", f"--as={1 << 30}:{1 << 30}", "--nproc=10:10", f"--fsize={256 << 20}:{256 << 20}",
        "--nofile=64:64", "--core=0:0",
    }  # fmt: skip
    assert sb.prlimit_argv({resource.RLIMIT_CPU: (resource.RLIM_INFINITY, resource.RLIM_INFINITY)})[1] == "--cpu=unlimited:unlimited"


def test_interpreter_dirs_cover_the_running_python():
    dirs = sb.interpreter_dirs()
    exe = os.path.realpath(sys.executable)
    if not exe.startswith("/usr/"):
        assert any(exe.startswith(d + "/") for d in dirs)
    assert not any(d in ("/", "/usr") or d.startswith("/usr/") for d in dirs)


def test_shell_argv_restores_path_after_the_login_profile():
    argv = sb.shell_argv("echo $PATH; false", "/venv/bin:/usr/bin")
    assert argv == ["bash", "-lc", "export PATH=/venv/bin:/usr/bin; echo $PATH; false"]


# ---------------------------------------------------------------------------------------------- environment


def test_sandbox_env_is_exactly_the_allowlist_plus_explicit_extras(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    env = sb.sandbox_env("/box", {"FOO": "bar", "LANG": "en_US.UTF-8"})
    assert set(env) == {"PATH", "HOME", "LANG", "SHELL", "FOO", *sb.THREAD_CAPS}
    assert env["HOME"] == "/box" and env["FOO"] == "bar" and env["LANG"] == "en_US.UTF-8"
    assert "sk-parent-secret" not in repr(env)
    for bad in ({"A=B": "x"}, {"": "x"}, {"A": "x\0y"}, {"A": 1}):
        with pytest.raises(ValueError):
            sb.sandbox_env("/box", bad)


# ---------------------------------------------------------------------------------------------- capability


@pytest.fixture
def fresh_capability():
    sb.detect_capability.cache_clear()
    yield
    sb.detect_capability.cache_clear()


def test_missing_bwrap_is_a_clear_error_naming_the_fix(monkeypatch, fresh_capability):
    real_which = sb.shutil.which
    monkeypatch.setattr(sb.shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    cap = sb.detect_capability("bwrap")
    assert not cap.available and "bubblewrap not installed" in cap.problem
    assert "scripts/setup_env.sh" in cap.problem and "apt-get install bubblewrap" in cap.problem
    assert "isolation='rlimits'" in cap.problem
    with pytest.raises(SandboxUnavailable, match="bubblewrap not installed"):
        sb.require_capability("bwrap")
    with pytest.raises(SandboxUnavailable, match="bubblewrap not installed"):
        sb.Sandbox()  # fails before creating anything


def test_non_root_bwrap_mode_names_the_missing_privilege(monkeypatch, fresh_capability):
    monkeypatch.setattr(sb.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(sb.os, "geteuid", lambda: 1000)
    cap = sb.detect_capability("bwrap")
    assert not cap.available and "needs root" in cap.problem and "isolation='rlimits'" in cap.problem


def test_rlimits_mode_as_root_refuses_without_setpriv(monkeypatch, fresh_capability):
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    monkeypatch.setattr(sb.os, "geteuid", lambda: 0)
    cap = sb.detect_capability("rlimits")
    assert not cap.available and "setpriv" in cap.problem
    with pytest.raises(ValueError):
        sb.detect_capability("none")


def test_capability_is_detected_once(monkeypatch, fresh_capability):
    calls = []
    real_which = sb.shutil.which
    monkeypatch.setattr(sb.shutil, "which", lambda name: calls.append(name) or real_which(name))
    sb.detect_capability("rlimits")
    sb.detect_capability("rlimits")
    assert calls.count("bwrap") == 1


def test_a_particular_uid_is_leased_only_when_nobody_holds_it(tmp_path):
    a, b = UidPool(30000, 2, lock_dir=str(tmp_path)), UidPool(30000, 2, lock_dir=str(tmp_path))
    assert a.try_acquire(30001) and not a.try_acquire(30001) and not b.try_acquire(30001)
    a.release(30001)
    assert b.try_acquire(30001)
    with pytest.raises(ValueError, match="outside this pool's range"):
        a.try_acquire(29999)


# a process whose main thread called exit(2) alone (SYS_exit, not exit_group): state Z, while its other thread runs
ZOMBIE_LEADER = """import ctypes, os, sys, threading, time
threading.Thread(target=lambda: [time.sleep(0.01) for _ in range(6000)]).start()
time.sleep(0.1)
print("threaded", flush=True)
ctypes.CDLL(None).syscall({"x86_64": 60, "aarch64": 93}[os.uname().machine], 0)
"""


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1].split()[0]


def test_a_zombie_main_thread_with_live_threads_counts_as_alive_and_is_killed():
    import subprocess
    import time

    proc = subprocess.Popen([sys.executable, "-c", ZOMBIE_LEADER], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"threaded\n"
        deadline = time.monotonic() + 10
        while _state(proc.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(proc.pid) == "Z"  # shows as a zombie ...
        hit = sb._scan_proc_one(str(proc.pid), {os.getuid()})
        assert hit is not None and hit[0] == proc.pid and hit[3] >= 2  # ... but counts as alive: its thread runs
        os.kill(proc.pid, 9)  # and SIGKILL ends it
        assert proc.wait(10) == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert sb._scan_proc_one(str(os.getpid()), {os.getuid()}) is not None


def test_uid_pool_trusts_only_a_private_lock_directory_of_its_own(tmp_path):
    """A lock directory another user made first (or loosened, or replaced by a symlink) could give two sandboxes one
    uid or redirect a lock file: refused by name; a symlinked lock file is not followed."""
    from slime.agentic.sandbox import SandboxError

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o700)
    loose.chmod(0o777)
    with pytest.raises(SandboxError, match="mode 0777: others may change or list it"):
        UidPool(30000, 2, lock_dir=str(loose)).acquire()
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 12345, 12345)
    with pytest.raises(SandboxError, match="belongs to uid 12345"):
        UidPool(30000, 2, lock_dir=str(theirs)).acquire()
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(SandboxError, match="not a directory"):
        UidPool(30000, 2, lock_dir=str(tmp_path / "link")).try_acquire(30000)
    good = tmp_path / "good"
    pool = UidPool(30000, 2, lock_dir=str(good))
    victim = tmp_path / "victim"
    good.mkdir(mode=0o700)
    (good / "30000.lock").symlink_to(victim)
    with pytest.raises(SandboxError, match="30000.lock cannot be opened safely"):
        pool.try_acquire(30000)
    assert not victim.exists()  # nothing created through the link
    assert pool.try_acquire(30001) and oct((good.stat().st_mode) & 0o777) == "0o700"
    pool.release(30001)
