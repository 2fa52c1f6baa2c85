"""The hidden tests location of a task's workspace, ``/tests`` inside its sandbox: empty and root-owned during the
episode (the agent can neither read the tests nor plant anything there), filled only while a staged script
(``setup.sh``, ``solution.sh``) or the evaluation runs, emptied again afterwards, and emptied before every staging
whatever is found there.

Two places hold it, one class each with the same methods (``clear``, ``stage``):

* :class:`HostTestsDir`: the bubblewrap sandbox binds a host directory at ``/tests``; staging copies files on the
  host. Nothing of the agent's runs between its commands (each one's pid
  namespace died with it) and every run has a fresh ``/tmp``.
* :class:`ContainerTestsDir`: the Docker sandbox's ``/tests`` is a directory of the container; staging sends one
  tar through ``docker cp`` (owners and modes set in the tar). Every clear
  first SIGKILLs every process of the container but its own (whoever's, however it hid), and before the tests the
  scratch places that live as long as the container (``/tmp``, ``/dev/shm``) are emptied, so the tests (``HOME=/tmp``)
  read no dotfile of the agent's and nothing of the agent's runs beside them.

What is staged is decided once (:func:`staged_files`) and written to either place the same way: root-owned,
read-only to the sandbox user, mode 0755 for a file whose source is executable by its owner, else 0644, directories
0755. Nothing in it is writable by the sandbox user: the tests' results leave through the sealed report channel
(:mod:`slime.agentic.sealed_report`), never through a file.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from slime.agentic import fs_tree
from slime.agentic.docker_sandbox import DockerSandbox, tar_bytes

_SKIP = shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc")
# `bash -c CLEAR slime-root MOUNT`: empty MOUNT (root's, 0755)
_CLEAR = 'set -e; rm -rf "$1"; mkdir -m 0755 "$1"'
# the places of the container that outlive a command (in the bubblewrap sandbox every run has its own /tmp)
_CLEAR_SCRATCH = _CLEAR + "; shopt -s dotglob nullglob; rm -rf /tmp/* /dev/shm/*"


def staged_files(files: Mapping[str, Path], dirs: Mapping[str, Path] | None = None) -> tuple[list[str], dict[str, tuple[Path, int]]]:
    """What a staging writes, relative to ``/tests``: the directories (parents first) and the files (path ->
    (source, mode)). `dirs` maps a name (``.``: ``/tests`` itself) to a source folder copied whole (symlinks followed,
    as ``copytree(symlinks=False)``; caches and ``*.pyc`` skipped); `files` a name to a source file."""
    subdirs: list[str] = []
    out: dict[str, tuple[Path, int]] = {}

    def add_dir(rel: str) -> None:
        if rel != "." and rel not in subdirs:
            add_dir(os.path.dirname(rel) or ".")
            subdirs.append(rel)

    def add_file(rel: str, src: Path) -> None:
        add_dir(os.path.dirname(rel) or ".")
        out[rel] = (src, 0o755 if os.stat(src).st_mode & 0o100 else 0o644)

    for name, src in (dirs or {}).items():
        for dirpath, dirnames, filenames in os.walk(src, followlinks=True):
            ignored = _SKIP(dirpath, dirnames + filenames)
            dirnames[:] = sorted(d for d in dirnames if d not in ignored)
            rel_dir = os.path.normpath(os.path.join(name, os.path.relpath(dirpath, src)))
            add_dir(rel_dir)
            for f in sorted(filenames):
                if f not in ignored:
                    add_file(os.path.normpath(os.path.join(rel_dir, f)), Path(dirpath) / f)
    for name, src in files.items():
        add_file(os.path.normpath(name), Path(src))
    return subdirs, out


class HostTestsDir:
    """``/tests`` as a host directory bound into the sandbox (`path`; `uid`: the sandbox user)."""

    def __init__(self, path: Path, uid: int | None):
        self.path, self.uid = Path(path), uid

    def clear(self, scratch: bool = False, kill: bool = True) -> None:
        """Empty it (whatever is there, whoever wrote it) and make it root-owned 0755 again. (`scratch`, `kill`:
        nothing to do here; every bubblewrap run has a fresh /tmp, and nothing outlives its command.)"""
        fs_tree.empty_directory(self.path)
        os.chown(self.path, os.geteuid(), os.getegid())
        os.chmod(self.path, 0o755)

    def stage(self, files: Mapping[str, Path], dirs: Mapping[str, Path] | None = None, scratch: bool = False,
              kill: bool = True) -> None:
        subdirs, staged = staged_files(files, dirs)
        self.clear(scratch, kill)
        for rel in subdirs:
            (self.path / rel).mkdir()
            os.chmod(self.path / rel, 0o755)
        for rel, (src, mode) in staged.items():
            shutil.copyfile(src, self.path / rel)
            os.chmod(self.path / rel, mode)


class ContainerTestsDir:
    """``/tests`` (`mount`) as a directory of the Docker sandbox `box` (or another root-owned folder the harness
    stages: a Harbor task's ``/solution``)."""

    def __init__(self, box: DockerSandbox, mount: str = "/tests"):
        self.box, self.mount = box, mount

    def clear(self, scratch: bool = False, kill: bool = True) -> None:
        """SIGKILL every process of the container but its own (unless not `kill`: the agent's processes stay, as
        Terminal-Bench keeps them), then empty it (and, with `scratch`, /tmp and /dev/shm), as root."""
        self.box.root_exec(_CLEAR_SCRATCH if scratch else _CLEAR, self.mount, kill_all=kill)

    def stage(self, files: Mapping[str, Path], dirs: Mapping[str, Path] | None = None, scratch: bool = False,
              kill: bool = True) -> None:
        subdirs, staged = staged_files(files, dirs)
        contents = {rel: src.read_bytes() for rel, (src, _) in staged.items()}
        modes = {rel: mode for rel, (_, mode) in staged.items()}
        data = tar_bytes(contents, dirs=subdirs, modes=modes, mtime=time.time())
        self.clear(scratch, kill)
        self.box.put_archive(self.mount, data)


__all__ = ["ContainerTestsDir", "HostTestsDir", "staged_files"]
