"""The seccomp filter of the bubblewrap sandbox: the system calls a sandbox never needs, denied (pure Python, no
libseccomp).

bubblewrap installs a classic-BPF seccomp program read from a file descriptor (`--seccomp FD`) on the sandboxed
process just before it execs it; every process the sandbox starts inherits it and none can remove it. Denied
(the call fails, the process goes on):

* kernel keys (`add_key`, `request_key`, `keyctl`): keyrings are not namespaced, so a key stored by one sandbox's
  uid stays readable by later holders of that uid (or, through the user and session keyrings, beyond the
  episode); EPERM.
* new namespaces (`unshare`, `setns`, and `clone` with a `CLONE_NEW*` flag): user namespaces are the door to most
  kernel attack surface for an unprivileged uid; EPERM. `clone3` passes its flags in memory a filter cannot read:
  ENOSYS, so the C library falls back to `clone` (as Docker's and systemd's filters do).
* `io_uring_*` (its operations bypass this filter), `bpf`, `perf_event_open`, `userfaultfd`; EPERM.
* socket families other than unix, IPv4 and IPv6 (`socket`, `socketpair`): AF_VSOCK reaches the hypervisor,
  AF_PACKET raw frames, AF_ALG the kernel's crypto; EAFNOSUPPORT. One exception: netlink with the NETLINK_ROUTE
  protocol, which the C library uses to list network interfaces (`getifaddrs`, `if_nameindex`, `getaddrinfo`'s
  AI_ADDRCONFIG) and which shows only the sandbox's own network namespace (its loopback); every other netlink
  protocol (kernel uevents, audit, ...) is refused.
* mounting and kernel modules (`mount`, `umount2`, `pivot_root`, the new mount API, `init_module`,
  `finit_module`, `delete_module`), `kexec_*`, `reboot`, `swapon`/`swapoff`; EPERM.
* any system call of another ABI than the host's (x86's 32-bit `int 0x80` and x32 numbers would reach `keyctl`
  under another number); ENOSYS.

POSIX message queues, SysV IPC and abstract unix sockets need no filter: the sandbox has its own IPC and network
namespaces (`--unshare-ipc`, `--unshare-net`), which end with it. `ptrace` stays allowed: the sandbox's pid
namespace shows it only its own processes.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct

# classic BPF (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
# seccomp (linux/seccomp.h): struct seccomp_data {int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]}
_NR, _ARCH, _ARG0_LOW, _ARG2_LOW = 0, 4, 16, 32  # little-endian hosts: the low 32 bits of args[i] come first
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

CLONE_NAMESPACES = 0x7E020080  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME
ALLOWED_SOCKET_FAMILIES = (1, 2, 10)  # AF_UNIX, AF_INET, AF_INET6
AF_NETLINK, NETLINK_ROUTE = 16, 0

# system call numbers, from the kernel's uapi headers (asm/unistd_64.h for x86_64; asm-generic/unistd.h, which
# arm64 uses); AUDIT_ARCH_* from linux/audit.h
_ARCHES = {
    "x86_64": dict(audit=0xC000003E, x32_bit=0x40000000, socket=41, socketpair=53, clone=56, clone3=435, denied={
        "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272, "setns": 308,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321, "perf_event_open": 298,
        "userfaultfd": 323, "mount": 165, "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "init_module": 175,
        "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
        "swapon": 167, "swapoff": 168}),
    "aarch64": dict(audit=0xC00000B7, x32_bit=None, socket=198, socketpair=199, clone=220, clone3=435, denied={
        "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97, "setns": 268,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280, "perf_event_open": 241,
        "userfaultfd": 282, "mount": 40, "umount2": 39, "pivot_root": 41, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "init_module": 105,
        "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "reboot": 142,
        "swapon": 224, "swapoff": 225}),
}
SUPPORTED_ARCHES = tuple(_ARCHES)


class SeccompUnsupported(RuntimeError):
    """No filter is known for this host's architecture."""


def host_arch() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def denied_syscalls(arch: str | None = None) -> dict[str, int]:
    """The system calls the filter refuses with EPERM outright (clone, clone3 and the socket calls are decided by
    their arguments or answered ENOSYS; see the module docstring)."""
    return dict(_table(arch)["denied"])


def _table(arch: str | None) -> dict:
    arch = arch or host_arch()
    if arch not in _ARCHES:
        raise SeccompUnsupported(f"no seccomp filter for the architecture {arch!r} (known: {', '.join(_ARCHES)})")
    return _ARCHES[arch]


@functools.cache  # built once per architecture: every sandbox start hands bwrap a copy of the same bytes
def filter_program(arch: str | None = None) -> bytes:
    """The BPF program (an array of `struct sock_filter`, as `bwrap --seccomp` reads it) for `arch`."""
    table = _table(arch)
    # instructions with symbolic jump targets, resolved below: ("insn", code, k, true_label, false_label)
    program: list[tuple] = []
    labels: dict[str, int] = {}

    def label(name: str) -> None:
        labels[name] = len(program)

    def emit(code: int, k: int, jt: str | None = None, jf: str | None = None) -> None:
        program.append((code, k, jt, jf))

    emit(_LD_W_ABS, _ARCH)
    emit(_JEQ_K, table["audit"], None, "foreign_abi")
    emit(_LD_W_ABS, _NR)
    if table["x32_bit"] is not None:
        emit(_JGE_K, table["x32_bit"], "foreign_abi", None)
    for number in sorted(set(table["denied"].values())):
        emit(_JEQ_K, number, "eperm", None)
    emit(_JEQ_K, table["clone3"], "enosys", None)
    emit(_JEQ_K, table["clone"], "clone_flags", None)
    emit(_JEQ_K, table["socket"], "socket_family", None)
    emit(_JEQ_K, table["socketpair"], "socket_family", None)
    emit(_RET_K, _RET_ALLOW)
    label("clone_flags")
    emit(_LD_W_ABS, _ARG0_LOW)
    emit(_JSET_K, CLONE_NAMESPACES, "eperm", None)
    emit(_RET_K, _RET_ALLOW)
    label("socket_family")
    emit(_LD_W_ABS, _ARG0_LOW)
    for family in ALLOWED_SOCKET_FAMILIES:
        emit(_JEQ_K, family, "allow", None)
    emit(_JEQ_K, AF_NETLINK, None, "no_family")
    emit(_LD_W_ABS, _ARG2_LOW)  # netlink: only its routing protocol
    emit(_JEQ_K, NETLINK_ROUTE, "allow", None)
    label("no_family")
    emit(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT)
    label("allow")
    emit(_RET_K, _RET_ALLOW)
    label("eperm")
    emit(_RET_K, _RET_ERRNO | errno.EPERM)
    label("foreign_abi")
    label("enosys")
    emit(_RET_K, _RET_ERRNO | errno.ENOSYS)

    out = bytearray()
    for index, (code, k, jt, jf) in enumerate(program):
        offsets = []
        for target in (jt, jf):
            offset = 0 if target is None else labels[target] - index - 1  # relative to the next instruction
            if not 0 <= offset <= 255:
                raise AssertionError(f"jump to {target} out of range at instruction {index}")
            offsets.append(offset)
        out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


def filter_fd(arch: str | None = None) -> int:
    """A fresh file descriptor holding the program, positioned at its start, for `bwrap --seccomp FD` (bwrap reads
    it to the end, so each sandboxed start needs its own). The caller passes it to the child and closes it."""
    program = filter_program(arch)
    fd = os.memfd_create("slime-seccomp")  # close-on-exec here; the child inherits it through pass_fds
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
