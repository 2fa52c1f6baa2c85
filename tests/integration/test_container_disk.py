"""The Docker backend's disk cap on btrfs (slime.agentic.container_disk), on a btrfs filesystem of the test's own (a
sparse image on a loop device): simple quotas switched on over full quota groups, a cap that holds from its first
byte, and a cap that waits for a rescan where full groups are all the kernel has."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from slime.agentic import container_disk

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mkfs.btrfs") or not shutil.which("btrfs"),
                                reason="needs root and btrfs-progs (scripts/setup_docker.sh installs them)")


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def btrfs(tmp_path):
    image, mnt = tmp_path / "fs.btrfs", tmp_path / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(2 << 30)
    sh("mkfs.btrfs", "-q", "-f", str(image))
    if subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a btrfs image here (no loop devices, or no btrfs in the kernel)")
    try:
        yield str(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def fill_image(root: str, files: int) -> str:
    """A subvolume standing for an image (many files, so a rescan takes a moment), and a snapshot of it standing
    for a container's writable layer, as dockerd's btrfs driver makes them."""
    sh("btrfs", "subvolume", "create", f"{root}/image")
    for d in range(files // 1000):
        os.makedirs(f"{root}/image/d{d}")
        for i in range(1000):
            with open(f"{root}/image/d{d}/f{i}", "w") as f:
                f.write(uuid.uuid4().hex * 8)
    sh("sync")
    sh("btrfs", "subvolume", "snapshot", f"{root}/image", f"{root}/layer")
    return f"{root}/layer"


def write(path: str, size: int) -> tuple[int, str]:
    done = subprocess.run(["head", "-c", str(size), "/dev/zero"], stdout=open(path, "wb"), stderr=subprocess.PIPE,
                          text=True)
    return os.path.getsize(path), done.stderr


def inconsistent(root: str) -> bool:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return container_disk._inconsistent(container_disk._fsid(fd))
    finally:
        os.close(fd)


def test_simple_quotas_replace_full_groups_and_a_cap_holds_at_once(btrfs):
    """Full groups enabled over existing data rescan it, and until the rescan ends the kernel enforces no limit;
    the data root is switched to simple quotas, which never rescan, and the first cap holds from the start."""
    layer = fill_image(btrfs, 20_000)
    sh("btrfs", "quota", "enable", btrfs)  # as scripts/setup_docker.sh did at every mount before
    sh("btrfs", "quota", "rescan", "-W", btrfs)
    mode = container_disk.enable_simple_quotas(btrfs)
    if mode != "squota":
        pytest.skip(f"this kernel has no btrfs simple quotas (6.7+): left in {mode!r}")
    assert container_disk.quota_mode(btrfs) == "squota" and not inconsistent(btrfs)
    disk = container_disk.ContainerDisk(layer, 16 << 20)
    size, err = write(f"{layer}/big", 200 << 20)
    assert size <= 16 << 20 and "quota exceeded" in err.lower()
    assert 15 << 20 <= disk.usage().bytes_used <= 16 << 20  # what it wrote, not the image it shares
    assert container_disk.enable_simple_quotas(btrfs) == "squota"  # idempotent: a second mount changes nothing
    os.unlink(f"{layer}/big")
    size, err = write(f"{layer}/big", 8 << 20)
    assert size == 8 << 20 and not err  # the limit is on what the layer holds now


def test_under_full_groups_a_cap_waits_for_the_rescan_before_it_is_trusted(btrfs):
    """Where full quota groups are all there is: enabling them starts a rescan, the groups are inconsistent while it
    runs (a write then goes past any limit), and a ContainerDisk returns only once they count again."""
    layer = fill_image(btrfs, 20_000)
    sh("btrfs", "quota", "enable", btrfs)  # starts the rescan, does not wait for it
    rescanning = inconsistent(btrfs)
    disk = container_disk.ContainerDisk(layer, 16 << 20)
    assert rescanning, "the rescan ended before the cap was made: nothing was tested"
    assert not inconsistent(btrfs)
    size, err = write(f"{layer}/big", 200 << 20)
    assert size <= 16 << 20 and "quota exceeded" in err.lower(), (size, err)
    assert disk.usage().bytes_used <= 16 << 20
