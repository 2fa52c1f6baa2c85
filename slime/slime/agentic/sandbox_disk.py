"""A sandbox's disk budget: its work directory on a filesystem of its own, capped in bytes and in files (issue 37).

Without it a sandbox wrote to the host's disk as much as it liked: gigabytes, and hundreds of thousands of files,
limited per file only (RLIMIT_FSIZE). Here the work directory is an ext4 filesystem in a sparse image file, loop-
mounted (``nosuid,nodev``) over the directory: ``mkfs.ext4 -N INODES`` caps the files and the image's size caps the
bytes; what the sandbox writes is its own, and a full disk is ``ENOSPC`` inside, never the host's. The image sits next
to the directory (``PATH.disk``); ``close`` unmounts and removes it; the sparse image costs the host only what was
written.

``mkfs.ext4`` runs once per process and budget: the image it makes (no journal, inode tables left to read as zeros:
~0.7 MB of data in a 1 GiB image) is kept in memory and written into each new image, and the loop device and the
mount are made with the kernel's calls directly (:mod:`slime.agentic.mount_calls`), mounted ``noinit_itable`` (the
sparse image's tables already read as zeros: no background zeroing). A disk costs ~3 ms to make and ~3 ms to close
here (through ``mkfs.ext4`` and ``mount -o loop`` each time: ~28 ms and ~13 ms). Every image of a budget has the same
filesystem UUID; the kernel does not use it to tell mounts apart.

The private ``/tmp`` gets the same treatment with a tmpfs (``size=`` and ``nr_inodes=``), mounted once per sandbox,
bound at ``/tmp`` and emptied after every command (:class:`CappedTmp`), where bubblewrap's own ``--tmpfs`` takes a
size but no file count.

A crashed owner leaves its mounts: :func:`slime.agentic.fs_tree.remove_tree` unmounts whatever is mounted below a
tree before removing it, so the pool server's start-up sweep of lease directories takes them too.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from slime.agentic import fs_tree, mount_calls

logger = logging.getLogger(__name__)

TIMEOUT_S = 60.0
FULL_FRACTION = 0.02  # free space or files below this share of the budget (or 2 MiB of space): the budget is spent
FULL_BYTES = 2 << 20
_MOUNT_FLAGS = mount_calls.MS_NOSUID | mount_calls.MS_NODEV


class DiskBudgetError(OSError):
    """The capped filesystem could not be made (no loop devices, no mkfs.ext4, not root)."""


def _tool(name: str) -> str:
    """An absolute path for `name` (mkfs.ext4 lives in /sbin, which a caller's PATH may lack), else `name`."""
    return shutil.which(name) or next((p for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")
                                       if os.access(p := os.path.join(d, name), os.X_OK)), name)


def _check(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DiskBudgetError(f"{what}: {e}") from None
    if done.returncode != 0:
        raise DiskBudgetError(f"{what} exited with {done.returncode}: "
                              f"{done.stderr.decode('utf-8', 'replace').strip()[-300:]}")


def _unmount(path: str, what: str) -> None:
    """umount; when busy (a process of the sandbox still finishing), detach it lazily: the last user's exit frees it."""
    try:
        mount_calls.unmount(path)
    except OSError as e:
        if e.errno == errno.EINVAL and not fs_tree.mounts_below(path):
            return  # not mounted (any more)
        logger.warning("unmounting %s of %s: %s; detaching it lazily", what, path, e)
        fs_tree.unmount_below(path)


@functools.lru_cache(maxsize=8)
def _formatted_ext4(size_bytes: int, files: int) -> tuple[tuple[int, bytes], ...]:
    """The data of a fresh ext4 image of `size_bytes` with room for `files` entries, as (offset, bytes) extents (the
    rest of the image reads as zeros): ``mkfs.ext4`` once per process and budget (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="slime-ext4-") as scratch:
        image = os.path.join(scratch, "image")
        with open(image, "xb") as f:
            f.truncate(size_bytes)
        _check([_tool("mkfs.ext4"), "-q", "-F", "-m", "0", "-N", str(files), "-O", "^has_journal",
                "-E", "lazy_itable_init=1,nodiscard", image], f"making an ext4 image of {size_bytes} bytes")
        extents = []
        with open(image, "rb") as f:
            fd, offset = f.fileno(), 0
            while offset < size_bytes:
                try:
                    start = os.lseek(fd, offset, os.SEEK_DATA)
                except OSError as e:
                    if e.errno == errno.ENXIO:  # no data after offset
                        break
                    raise
                end = os.lseek(fd, start, os.SEEK_HOLE)
                extents.append((start, os.pread(fd, end - start, start)))
                offset = end
        return tuple(extents)


@dataclass(frozen=True)
class Usage:
    bytes_used: int
    bytes_total: int
    files_used: int
    files_total: int

    def spent(self) -> str:
        """Which part of the budget is spent, in words ("" when neither)."""
        out = []
        if self.bytes_total and self.bytes_total - self.bytes_used < min(max(FULL_FRACTION * self.bytes_total, FULL_BYTES),
                                                                         self.bytes_total / 2):
            out.append(f"filled its disk budget ({self.bytes_total >> 20} MiB)")
        if self.files_total and self.files_total - self.files_used < FULL_FRACTION * self.files_total:
            out.append(f"used up its file budget ({self.files_total} files and directories)")
        return "; ".join(out)


def usage(path: str | os.PathLike) -> Usage:
    st = os.statvfs(path)
    return Usage((st.f_blocks - st.f_bfree) * st.f_frsize, st.f_blocks * st.f_frsize, st.f_files - st.f_ffree,
                 st.f_files)


class CappedDirectory:
    """`path` (an existing, empty directory) becomes the root of an ext4 filesystem of `size_bytes` with room for
    `files` entries. ``close()`` unmounts it and removes the image: what was written is gone."""

    def __init__(self, path: str | os.PathLike, size_bytes: int, files: int):
        self.path = os.path.abspath(os.fspath(path))
        self.image = self.path + ".disk"
        self.size_bytes, self.files = int(size_bytes), int(files)
        self.mounted = False
        try:
            extents = _formatted_ext4(self.size_bytes, self.files)
            fd = os.open(self.image, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, self.size_bytes)
                for offset, data in extents:
                    os.pwrite(fd, data, offset)
            finally:
                os.close(fd)
            try:
                device, loop_fd = mount_calls.attach_loop(self.image)
                try:
                    mount_calls.mount(device, self.path, "ext4", _MOUNT_FLAGS | mount_calls.MS_NOATIME, "noinit_itable")
                finally:
                    os.close(loop_fd)  # mounted: the mount holds the device; else autoclear detaches it here
            except OSError as e:
                raise DiskBudgetError(f"mounting the disk of {self.path}: {e}") from None
            self.mounted = True
            lost = os.path.join(self.path, "lost+found")
            if os.path.isdir(lost):
                os.rmdir(lost)
        except BaseException:
            self.close()
            raise

    def usage(self) -> Usage:
        return usage(self.path)

    def close(self) -> None:
        """Unmount (lazily when busy: the last user's exit frees it) and remove the image. Idempotent."""
        if self.mounted:
            _unmount(self.path, "the disk")
            self.mounted = False
        try:
            os.unlink(self.image)
        except FileNotFoundError:
            pass


class CappedTmp:
    """A tmpfs of `size_bytes` and `files` entries at `path` (made when missing), for a sandbox's ``/tmp``; ``clear()`` empties
    it (after every command), ``close()`` unmounts and removes it."""

    def __init__(self, path: str | os.PathLike, size_bytes: int, files: int):
        self.path = os.path.abspath(os.fspath(path))
        self.size_bytes, self.files = int(size_bytes), int(files)
        self.mounted = False
        os.makedirs(self.path, 0o755, exist_ok=True)  # a fresh (empty) directory of the caller's, or made here
        try:
            try:
                mount_calls.mount("tmpfs", self.path, "tmpfs", _MOUNT_FLAGS,
                                  f"size={self.size_bytes},nr_inodes={self.files},mode=1777")
            except OSError as e:
                raise DiskBudgetError(f"mounting the /tmp of {self.path}: {e}") from None
            self.mounted = True
        except BaseException:
            self.close()
            raise

    def usage(self) -> Usage:
        return usage(self.path)

    def clear(self) -> None:
        """Empty it (whatever the sandbox left; nothing of the sandbox runs any more)."""
        fs_tree.empty_directory(self.path)

    def close(self) -> None:
        if self.mounted:
            _unmount(self.path, "the /tmp")
            self.mounted = False
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            logger.warning("sandbox /tmp %s: cannot remove it: %s", self.path, e)


def sweep_stale() -> int:
    """Detach the disks and /tmp mounts of sandboxes whose owner process is gone (killed: its close() never ran),
    wherever they are mounted, and remove their images and empty mount points; returns how many. Names carry the
    owner's pid (``slime-sandbox-<pid>-...``, ``slime-sandbox-tmp-<pid>-...``); a live owner's are left."""
    from slime.agentic.cgroups import owner_gone

    swept = 0
    for point in fs_tree.mounts_below("/"):
        if not owner_gone(os.path.basename(point)):
            continue
        fs_tree.unmount_below(point)
        for leftover in (point + ".disk",):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        try:
            os.rmdir(point)
        except OSError:
            pass
        swept += 1
    return swept


__all__ = ["CappedDirectory", "CappedTmp", "DiskBudgetError", "Usage", "sweep_stale", "usage"]
