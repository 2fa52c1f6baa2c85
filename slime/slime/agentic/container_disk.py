"""The disk budget of a Docker sandbox: a cap on what a container writes to its writable layer (issue 37).

Docker's overlay2 driver can cap a container's writable layer only on xfs mounted with project quotas; this machine's
kernel has no quota support at all (``CONFIG_QUOTA`` and XFS quotas are off). Btrfs quota groups are btrfs's own and
work here: ``scripts/setup_docker.sh`` puts the private daemon's data root on a btrfs filesystem with quotas on and
runs dockerd's btrfs storage driver, so each container's writable layer is a subvolume of its own, and this module
gives that subvolume a limit on its **exclusive** bytes: what the container wrote or changed, not the image it
shares (Docker's own ``--storage-opt size=`` on btrfs limits the referenced bytes, the image included, so an image
of 400 MB would leave a 1 GiB budget 600 MB, and one over the budget could not write at all). File metadata lives in
the subvolume's trees and counts against the same bytes (~350 bytes a file here: a 1 GiB budget holds about three
million empty files); the host sees one image file whatever the container makes, so there is no separate file cap.

The filesystem counts in btrfs's **simple quota** mode (kernel 6.7+; ``scripts/setup_docker.sh`` switches the data root
to it, :func:`enable_simple_quotas`): each extent is charged to the subvolume that wrote it, and the counts never go
stale. Full quota groups do: Docker's btrfs driver destroys a container's group before its subvolume, and the kernel
then marks every group inconsistent and stops enforcing limits (a capped container was seen writing 200 MB), for the
containers still running too, until a rescan. Simple quotas refuse that destroy (EBUSY, which Docker logs and passes)
and drop the group with its subvolume. On a kernel without them the full mode stays, and a cap waits for a rescan
before it is trusted (:func:`_ensure_consistent`); the other containers' caps are then only as good as the last rescan.

Everything is read and set on this host, with btrfs's ioctls and ``/sys/fs/btrfs/<fsid>/qgroups``: the container's
subvolume is ``<DockerRootDir>/btrfs/subvolumes/<mount id>`` (the mount id from the daemon's layer database). A daemon
whose data root is not on this host, or not btrfs, gets no cap: :func:`attach` returns None and the sandbox refuses to
start unless the user opted into the weaker guarantee (``SLIME_DOCKER_STORAGE_CAP=off``, logged by name).
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import uuid

from slime.agentic.sandbox_disk import Usage

STORAGE_CAP_ENV = "SLIME_DOCKER_STORAGE_CAP"  # "off": containers without a cap on their writable layer (logged)


def _ioc(direction: int, number: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (0x94 << 8) | number  # btrfs's ioctl type is 0x94


_READ, _WRITE = 2, 1
_FS_INFO = _ioc(_READ, 31, 1024)  # struct btrfs_ioctl_fs_info_args: max_id, num_devices (u64), fsid[16], ...
_INO_LOOKUP = _ioc(_READ | _WRITE, 18, 4096)  # struct btrfs_ioctl_ino_lookup_args: treeid, objectid, name[4080]
_QGROUP_LIMIT = _ioc(_READ, 43, 48)  # struct btrfs_ioctl_qgroup_limit_args: qgroupid, struct btrfs_qgroup_limit
_QUOTA_CTL = _ioc(_READ | _WRITE, 40, 16)  # struct btrfs_ioctl_quota_ctl_args: cmd, status (u64)
_QUOTA_CTL_ENABLE, _QUOTA_CTL_DISABLE, _QUOTA_CTL_ENABLE_SIMPLE = 1, 2, 4
_QUOTA_RESCAN = _ioc(_WRITE, 44, 64)  # struct btrfs_ioctl_quota_rescan_args: flags, progress, reserved[6] (u64)
_QUOTA_RESCAN_WAIT = _ioc(0, 46, 0)
_LIMIT_MAX_EXCL = 1 << 1
_SUBVOLUME_ROOT_INO = 256  # BTRFS_FIRST_FREE_OBJECTID: the inode of every subvolume's root directory


def opted_out() -> bool:
    return os.environ.get(STORAGE_CAP_ENV, "").strip().lower() in ("off", "0", "false", "no")


def layer_path(docker_root: str, container_id: str) -> str | None:
    """The container's writable layer on this host (btrfs driver), or None when it is not here."""
    try:
        with open(os.path.join(docker_root, "image", "btrfs", "layerdb", "mounts", container_id, "mount-id")) as f:
            mount_id = f.read().strip()
    except OSError:
        return None
    path = os.path.join(docker_root, "btrfs", "subvolumes", mount_id)
    return path if mount_id and os.path.isdir(path) else None


class ContainerDisk:
    """The exclusive-bytes limit of one container's writable layer, and what it has spent (`usage`)."""

    def __init__(self, path: str, budget_bytes: int):
        self.path, self.budget_bytes = path, int(budget_bytes)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self.fsid = _fsid(fd)
            lookup = bytearray(struct.pack("=QQ", 0, _SUBVOLUME_ROOT_INO) + bytes(4080))
            fcntl.ioctl(fd, _INO_LOOKUP, lookup, True)
            self.subvolume = struct.unpack_from("=Q", lookup)[0]
            # qgroupid 0: the subvolume of `fd`; flags, max_rfer, max_excl, rsv_rfer, rsv_excl
            fcntl.ioctl(fd, _QGROUP_LIMIT, struct.pack("=6Q", 0, _LIMIT_MAX_EXCL, 0, self.budget_bytes, 0, 0))
            _ensure_consistent(fd, self.fsid)
        finally:
            os.close(fd)
        self._sysfs = f"/sys/fs/btrfs/{self.fsid}/qgroups/0_{self.subvolume}"

    def usage(self) -> Usage:
        """Exclusive bytes written against the budget (as the kernel last committed them; files are in the bytes)."""
        try:
            with open(os.path.join(self._sysfs, "exclusive")) as f:
                return Usage(int(f.read().split()[0]), self.budget_bytes, 0, 0)
        except (OSError, ValueError, IndexError):  # the container (and its qgroup) is gone
            return Usage(0, 0, 0, 0)


def _qgroups_flag(fsid: str, name: str) -> str:
    try:
        with open(f"/sys/fs/btrfs/{fsid}/qgroups/{name}") as f:
            return f.read().strip()
    except OSError:  # quotas off, or a kernel without the file (before 6.1)
        return ""


def _inconsistent(fsid: str) -> bool:
    return _qgroups_flag(fsid, "inconsistent") == "1"


def _fsid(fd: int) -> str:
    info = bytearray(1024)
    fcntl.ioctl(fd, _FS_INFO, info, True)
    return str(uuid.UUID(bytes=bytes(info[16:32])))


def quota_mode(path: str) -> str:
    """``squota`` (simple quotas), ``qgroup`` (full quota groups) or ``""`` (quotas off) for the btrfs at `path`."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _qgroups_flag(_fsid(fd), "mode")
    finally:
        os.close(fd)


def enable_simple_quotas(path: str) -> str:
    """Switch the btrfs mounted at `path` to simple quotas (full quota groups are disabled first, their limits with
    them: call it before any container runs). Returns the mode it is left in: ``squota``, or ``qgroup`` where the
    kernel has no simple quotas (EINVAL/EOPNOTSUPP; full groups are then enabled again)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fsid = _fsid(fd)
        mode = _qgroups_flag(fsid, "mode")
        if mode == "squota":
            return mode
        if mode:
            fcntl.ioctl(fd, _QUOTA_CTL, bytearray(struct.pack("=QQ", _QUOTA_CTL_DISABLE, 0)), True)
        try:
            fcntl.ioctl(fd, _QUOTA_CTL, bytearray(struct.pack("=QQ", _QUOTA_CTL_ENABLE_SIMPLE, 0)), True)
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTTY):
                raise
            fcntl.ioctl(fd, _QUOTA_CTL, bytearray(struct.pack("=QQ", _QUOTA_CTL_ENABLE, 0)), True)
            fcntl.ioctl(fd, _QUOTA_RESCAN_WAIT)
        return _qgroups_flag(fsid, "mode")
    finally:
        os.close(fd)


def _ensure_consistent(fd: int, fsid: str) -> None:
    """Make the filesystem's quota groups count again before a container relies on its limit.

    While btrfs's quota groups are marked inconsistent (a rescan under way: `btrfs quota enable` on a mounted data
    root starts one; or the kernel gave up counting, e.g. dropping a deep subvolume), the kernel reserves nothing
    against a limit: a container with a 16 MiB cap wrote 200 MB. Wait for a rescan under way, start one where none
    is, and refuse (OSError) when the groups still do not count: a cap that is not enforced is no cap."""
    if not _inconsistent(fsid):
        return  # always so under simple quotas: one read of sysfs
    fcntl.ioctl(fd, _QUOTA_RESCAN_WAIT)  # the rescan under way, if any (returns at once when none runs)
    if _inconsistent(fsid):
        try:
            fcntl.ioctl(fd, _QUOTA_RESCAN, bytes(64))
        except OSError as e:
            if e.errno != errno.EINPROGRESS:  # EINPROGRESS: another sandbox started one: wait for that
                raise
        fcntl.ioctl(fd, _QUOTA_RESCAN_WAIT)
    if _inconsistent(fsid):
        raise OSError(errno.EAGAIN, "btrfs quota groups of the Docker data root stay inconsistent after a rescan: "
                      "writable-layer caps are not enforced")


def attach(docker_root: str | None, driver: str | None, container_id: str, budget_bytes: int) -> ContainerDisk | None:
    """Cap the container's writable layer at `budget_bytes` when its daemon keeps it here on btrfs, else None.
    Raises OSError when the layer is here but cannot be capped (btrfs quotas off: ``ENOTCONN``)."""
    if driver != "btrfs" or not docker_root:
        return None
    path = layer_path(docker_root, container_id)
    return ContainerDisk(path, budget_bytes) if path is not None else None


__all__ = ["STORAGE_CAP_ENV", "ContainerDisk", "attach", "enable_simple_quotas", "layer_path", "opted_out",
           "quota_mode"]


if __name__ == "__main__":  # scripts/setup_docker.sh: python3 -m slime.agentic.container_disk simple-quotas DATA_ROOT
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "simple-quotas":
        sys.exit("usage: python -m slime.agentic.container_disk simple-quotas PATH")
    print(enable_simple_quotas(sys.argv[2]))
