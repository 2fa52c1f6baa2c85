"""What an agent leaves on the host side: a directory 3,000 levels deep (Python 3.11's shutil.rmtree and os.walk
end in RecursionError on it), names that are not UTF-8, setgid directories and world-writable files in a directory
handed back to its owner. Cleanup removes or fixes each, never raises, and the env pool restarts over them."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from slime.agentic import fs_tree
from slime.agentic import sandbox as sb
from slime.agentic.sandbox import Sandbox

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

# 3,000 levels by relative mkdir + cd (each path stays short; the whole is far beyond PATH_MAX and the recursion
# limit), plus a file whose name is not UTF-8 and a symlink out of the tree
DEEP = ("python3 -c \"import os\nfor _ in range(3000):\n    os.mkdir('d'); os.chdir('d')\nopen('leaf', 'w').write('x')\" "
        "&& printf x > \"$(printf 'bad\\377name')\" && ln -s /etc/passwd out")


def arun(coro):
    return asyncio.run(coro)


def test_an_owned_work_directory_with_a_deep_tree_is_removed(base_dir):
    async def go():
        box = Sandbox(base_dir=base_dir)
        r = await box.run(DEEP)
        assert r.exit_code == 0, r.stderr
        path = box.path
        await box.aclose()
        return path
    path = arun(go())
    assert not os.path.lexists(path)
    assert os.path.exists("/etc/passwd")  # the symlink was removed, not followed


def test_a_handed_back_directory_is_its_owners_again_without_setgid_or_world_writable_entries(tmp_path, base_dir):
    work = tmp_path / "work"
    work.mkdir()
    (work / "mine.txt").write_text("kept")
    os.chown(work, 4321, 4321)

    async def go():
        async with Sandbox(work) as box:
            r = await box.run(DEEP + " && mkdir shared && chmod 2777 shared && touch open && chmod 0666 open"
                              " && cp /bin/true suid && chmod 4755 suid")
            assert r.exit_code == 0, r.stderr
    arun(go())
    assert work.stat().st_uid == 4321 and (work / "mine.txt").read_text() == "kept"
    for entry in ("shared", "open", "suid", "d"):
        st = os.lstat(work / entry)
        assert st.st_uid == 4321, entry
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH), (entry, oct(st.st_mode))
    fs_tree.remove_tree(work)
    assert not work.exists()


def test_the_env_pool_starts_over_a_deep_leftover(tmp_path):
    from slime.agentic.env_service.pool import LeasePool
    from slime.agentic.env_service.providers import CommandProvider
    from slime.agentic.env_service.settings import PoolSettings

    deep = tmp_path / "leases" / "lease-left-behind"  # a lease directory a killed server left
    deep.mkdir(parents=True)
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)

    async def go():
        pool = LeasePool(PoolSettings(state_dir=str(tmp_path)), CommandProvider())
        await pool.start()
        try:
            assert os.listdir(pool.lease_root) == []
        finally:
            await pool.shutdown()
    arun(go())
