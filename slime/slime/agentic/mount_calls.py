"""mount(2), umount2(2) and loop devices called directly, for the sandbox's capped disks and /tmp (issue 37).

Each sandbox mounts an ext4 image and a tmpfs and unmounts both when it closes. Through ``mount(8)`` and
``umount(8)`` that cost ~40 ms a sandbox on this machine: a process per call, and ``mount -o loop`` probing the image
with libblkid and searching for a free loop device by itself. The same kernel calls made from here take ~4 ms
(``bench/sealing_cost.py`` measures what the budgets add to an episode).

Loop devices are attached with ``LOOP_CONFIGURE`` (Linux 5.8+; ``LOOP_SET_FD`` and ``LOOP_SET_STATUS64`` on older
kernels) and the autoclear flag: the device detaches itself when its filesystem is unmounted, so nothing is left to
free by hand, also after a lazy unmount.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import struct

MS_NOSUID, MS_NODEV, MS_NOATIME = 0x2, 0x4, 0x400
MNT_DETACH, UMOUNT_NOFOLLOW = 0x2, 0x8

_LOOP_CTL_GET_FREE = 0x4C82
_LOOP_CONFIGURE = 0x4C0A
_LOOP_SET_FD = 0x4C00
_LOOP_CLR_FD = 0x4C01
_LOOP_SET_STATUS64 = 0x4C04
_LO_FLAGS_AUTOCLEAR = 4
_LOOP_MAJOR = 7
_ATTACH_TRIES = 32  # another process may take the free device between asking and attaching (EBUSY): ask again

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)


def _raise_errno(what: str, path: str) -> None:
    code = ctypes.get_errno()
    raise OSError(code, f"{what}: {os.strerror(code)}", path)


def mount(source: str, target: str, fstype: str, flags: int = 0, data: str = "") -> None:
    """mount(2): `source` on `target` as `fstype` with `flags` (MS_*) and the filesystem's own options `data`."""
    if _libc.mount(os.fsencode(source), os.fsencode(target), fstype.encode(), flags, data.encode() if data else None) != 0:
        _raise_errno(f"mounting {fstype} {source}", target)


def unmount(target: str, lazy: bool = False) -> None:
    """umount2(2) without following a symlink at `target`; `lazy`: detach now, free when the last user is gone."""
    if _libc.umount2(os.fsencode(target), UMOUNT_NOFOLLOW | (MNT_DETACH if lazy else 0)) != 0:
        _raise_errno("unmounting", target)


def _loop_info64(flags: int) -> bytes:
    # struct loop_info64: device, inode, rdevice, offset, sizelimit (u64); number, encrypt_type,
    # encrypt_key_size, flags (u32); file_name[64], crypt_name[64], encrypt_key[32]; init[2] (u64)
    return struct.pack("=5Q4I64s64s32s2Q", 0, 0, 0, 0, 0, 0, 0, 0, flags, b"", b"", b"", 0, 0)


def _loop_device(number: int) -> str:
    """/dev/loopN, made when the device node is missing (a container's /dev may only have loop-control)."""
    path = f"/dev/loop{number}"
    if not os.path.exists(path):
        try:
            os.mknod(path, 0o660 | stat.S_IFBLK, os.makedev(_LOOP_MAJOR, number))
        except FileExistsError:  # made by another process meanwhile
            pass
    return path


def attach_loop(image: str) -> tuple[str, int]:
    """Attach `image` to a free loop device with autoclear; returns (device path, an open descriptor of it). Close
    the descriptor once the device is mounted (or not needed): the last close of an unmounted autoclear device
    detaches it."""
    ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        for _ in range(_ATTACH_TRIES):
            device = _loop_device(fcntl.ioctl(ctl, _LOOP_CTL_GET_FREE))
            fd = os.open(device, os.O_RDWR | os.O_CLOEXEC)
            try:
                _configure(fd, backing)
                return device, fd
            except OSError as e:
                os.close(fd)
                if e.errno != errno.EBUSY:
                    raise OSError(e.errno, f"attaching {image} to {device}: {e.strerror}") from None
        raise OSError(errno.EBUSY, f"attaching {image}: every free loop device was taken first, {_ATTACH_TRIES} times")
    finally:
        os.close(backing)
        os.close(ctl)


def _configure(fd: int, backing: int) -> None:
    try:  # struct loop_config: fd, block_size (u32), loop_info64, reserved u64[8]
        fcntl.ioctl(fd, _LOOP_CONFIGURE, struct.pack("=2I", backing, 0) + _loop_info64(_LO_FLAGS_AUTOCLEAR) + bytes(64))
        return
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTTY):  # else a kernel before 5.8: the two-step way
            raise
    fcntl.ioctl(fd, _LOOP_SET_FD, backing)
    try:
        fcntl.ioctl(fd, _LOOP_SET_STATUS64, _loop_info64(_LO_FLAGS_AUTOCLEAR))
    except OSError:
        fcntl.ioctl(fd, _LOOP_CLR_FD, 0)
        raise


__all__ = ["MS_NOATIME", "MS_NODEV", "MS_NOSUID", "attach_loop", "mount", "unmount"]
