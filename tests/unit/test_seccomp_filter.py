"""The sandbox's seccomp program (slime.agentic.seccomp), run by a small classic-BPF interpreter written from the
kernel's definition of the instructions it uses, on hand-made `struct seccomp_data` inputs."""

from __future__ import annotations

import errno
import struct

import pytest

from slime.agentic import seccomp

ALLOW, ERRNO = 0x7FFF0000, 0x00050000


def run_filter(program: bytes, nr: int, arch: int, args=(0,) * 6) -> int:
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    insns = [struct.unpack_from("=HBBI", program, off) for off in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld w abs
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset with k
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("arch", seccomp.SUPPORTED_ARCHES)
def test_denied_calls_fail_and_everything_else_is_allowed(arch):
    table = seccomp._ARCHES[arch]
    program = seccomp.filter_program(arch)
    audit = table["audit"]
    for name, nr in seccomp.denied_syscalls(arch).items():
        assert run_filter(program, nr, audit) == ERRNO | errno.EPERM, name
    for name in ("add_key", "request_key", "keyctl", "unshare", "setns", "io_uring_setup", "bpf", "mount"):
        assert name in seccomp.denied_syscalls(arch)
    assert run_filter(program, table["clone3"], audit) == ERRNO | errno.ENOSYS  # glibc falls back to clone
    for nr in (0, 1, 2, 59, 60, 231, 400):  # read, write, open, execve, exit, exit_group (x86_64), a free number
        if nr not in seccomp.denied_syscalls(arch).values() and nr not in (table["socket"], table["socketpair"],
                                                                           table["clone"], table["clone3"]):
            assert run_filter(program, nr, audit) == ALLOW, nr


@pytest.mark.parametrize("arch", seccomp.SUPPORTED_ARCHES)
def test_sockets_only_unix_and_inet_and_clone_without_namespaces(arch):
    table = seccomp._ARCHES[arch]
    program, audit = seccomp.filter_program(arch), table["audit"]
    for call in (table["socket"], table["socketpair"]):
        for family in (1, 2, 10):
            assert run_filter(program, call, audit, (family, 1, 0, 0, 0, 0)) == ALLOW
        for family in (17, 40, 38):  # packet, vsock, alg
            assert run_filter(program, call, audit, (family, 1, 0, 0, 0, 0)) == ERRNO | errno.EAFNOSUPPORT
        # netlink: its routing protocol only (the sandbox's own interfaces); uevents (15), audit (9) refused
        assert run_filter(program, call, audit, (16, 3, 0, 0, 0, 0)) == ALLOW
        for protocol in (15, 9, 4):
            assert run_filter(program, call, audit, (16, 3, protocol, 0, 0, 0)) == ERRNO | errno.EAFNOSUPPORT
    thread_flags = 0x3D0F00  # what pthread_create passes (VM, FS, FILES, SIGHAND, THREAD, SYSVSEM, SETTLS, ...)
    assert run_filter(program, table["clone"], audit, (thread_flags, 0, 0, 0, 0, 0)) == ALLOW
    assert run_filter(program, table["clone"], audit, (17, 0, 0, 0, 0, 0)) == ALLOW  # fork: SIGCHLD
    for flag in (0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x08000000):  # NEWUSER, NEWPID, NEWNET, NEWNS, NEWIPC
        assert run_filter(program, table["clone"], audit, (17 | flag, 0, 0, 0, 0, 0)) == ERRNO | errno.EPERM


def test_other_abis_are_refused():
    program = seccomp.filter_program("x86_64")
    assert run_filter(program, 288, 0x40000003) == ERRNO | errno.ENOSYS  # i386 (int 0x80): its keyctl number
    assert run_filter(program, 0x40000000 | 250, 0xC000003E) == ERRNO | errno.ENOSYS  # x32 keyctl
    with pytest.raises(seccomp.SeccompUnsupported, match="riscv64"):
        seccomp.filter_program("riscv64")
