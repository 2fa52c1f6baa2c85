"""The bubblewrap sandbox's seccomp filter in real sandboxes: kernel keys (not namespaced, so a key one episode's
uid stores outlives the episode), new user namespaces, io_uring and socket families beyond unix/inet are refused;
what agents do (threads, child processes, loopback sockets) still works; a host where the filter cannot be used
refuses to start unless the user opts out, by name."""

from __future__ import annotations

import asyncio
import logging

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.sandbox import Sandbox, SandboxUnavailable

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

PROBE = r'''
import ctypes, errno, socket, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": dict(add_key=248, keyctl=250, unshare=272, io_uring_setup=425),
      "aarch64": dict(add_key=217, keyctl=219, unshare=97, io_uring_setup=425)}[__import__("platform").machine()]
def call(nr, *args):
    r = libc.syscall(nr, *args)
    return errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok"
print("add_key", call(NR["add_key"], b"user", b"hidden", b"tests/test_hidden.py", 20, ctypes.c_long(-4)))
print("keyctl_search", call(NR["keyctl"], 10, ctypes.c_long(-4), b"user", b"hidden", 0))
print("unshare_user", call(NR["unshare"], 0x10000000))
print("io_uring", call(NR["io_uring_setup"], 8, 0))
for fam, proto, name in ((1, 0, "unix"), (2, 0, "inet"), (10, 0, "inet6"), (40, 0, "vsock"), (16, 0, "netlink_route"),
                         (16, 15, "netlink_uevent"), (17, 0, "packet")):
    try:
        kind = socket.SOCK_DGRAM if fam == 16 else socket.SOCK_RAW if fam == 17 else socket.SOCK_STREAM
        socket.socket(fam, kind, proto).close()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno))
print("ifaces", ",".join(n for _, n in socket.if_nameindex()))
t = threading.Thread(target=print, args=("thread", "ok")); t.start(); t.join()
print("child", subprocess.run([sys.executable, "-c", "print('ok')"], capture_output=True, text=True).stdout.strip())
a, b = socket.socketpair(); a.sendall(b"x"); print("socketpair", "ok" if b.recv(1) == b"x" else "bad")
'''


def probe(**kw) -> dict[str, str]:
    async def go():
        async with Sandbox(**kw) as box:
            return await box.run_python(PROBE)
    r = asyncio.run(go())
    assert r.exit_code == 0, r.stderr
    return dict(line.split(" ", 1) for line in r.stdout.splitlines())


def test_the_filter_is_installed_and_refuses_what_no_sandbox_needs(base_dir):
    assert _CAP.seccomp, "this host installs the filter (the probe at detection ran bwrap --seccomp)"
    seen = probe(base_dir=base_dir)
    assert seen["add_key"] == seen["keyctl_search"] == "EPERM"  # nothing to store for a later episode, or read
    assert seen["unshare_user"] == "EPERM" and seen["io_uring"] == "EPERM"
    assert seen["vsock"] == seen["netlink_uevent"] == seen["packet"] == "EAFNOSUPPORT"
    assert seen["unix"] == seen["inet"] == seen["inet6"] == seen["netlink_route"] == "ok"
    assert seen["ifaces"] == "lo"  # the C library lists interfaces over netlink: only the sandbox's own loopback
    assert seen["thread"] == seen["child"] == seen["socketpair"] == "ok"


def test_util_linux_unshare_cannot_make_a_user_namespace(base_dir):
    async def go():
        async with Sandbox(base_dir=base_dir) as box:
            return await box.run("unshare --user --map-root-user id -u; echo rc=$?")
    r = asyncio.run(go())
    assert "rc=0" not in r.stdout and "Operation not permitted" in r.stderr + r.stdout


def test_each_start_gets_its_own_filter_descriptor_and_none_leaks(base_dir):
    import os

    before = set(os.listdir("/proc/self/fd"))

    async def go():
        async with Sandbox(base_dir=base_dir) as box:
            for _ in range(3):  # bwrap reads the program to its end: a shared descriptor would be empty the 2nd time
                assert (await box.run(["true"])).exit_code == 0
            process = await box.spawn(["cat"])
            await process.kill()
    asyncio.run(go())
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_a_host_without_the_filter_refuses_unless_the_user_opts_out(monkeypatch, caplog):
    from slime.agentic import seccomp

    def unsupported(arch=None):
        raise seccomp.SeccompUnsupported("no seccomp filter for the architecture 'riscv64'")

    monkeypatch.setattr(seccomp, "filter_fd", unsupported)
    sb.detect_capability.cache_clear()
    try:
        cap = sb.detect_capability("bwrap")
        assert not cap.available and "riscv64" in cap.problem and "SLIME_SANDBOX_SECCOMP=off" in cap.problem
        with pytest.raises(SandboxUnavailable, match="seccomp"):
            Sandbox()
        monkeypatch.setenv("SLIME_SANDBOX_SECCOMP", "off")
        sb.detect_capability.cache_clear()
        with caplog.at_level(logging.WARNING, logger="slime.agentic.sandbox"):
            cap = sb.detect_capability("bwrap")
        assert cap.available and not cap.seccomp
        assert "kernel keyrings" in caplog.text  # the weaker guarantee, named
    finally:
        sb.detect_capability.cache_clear()
