"""Whole-tree operations on directories a sandboxed agent wrote: remove, chown, and make safe to hand back.

An agent controls the shape of what it leaves: a directory 3,000 levels deep (Python 3.11's `shutil.rmtree` and
`os.walk` recurse once per level and end in RecursionError, which `ignore_errors=True` does not catch, so the
cleanup of an episode, or a pool server's start-up sweep, would crash), paths longer than PATH_MAX, names that are
not UTF-8, symlinks pointing anywhere. These run coreutils and findutils instead (`rm`, `chown`, `find`: fts-based,
iterative, descriptor-relative, never following a symlink they meet inside the tree, and not crossing into another
filesystem), each bounded by a timeout, and never raise for what the tree holds: an error is logged and reported.
"""

from __future__ import annotations

import logging
import os
import subprocess

logger = logging.getLogger(__name__)

TIMEOUT_S = 600.0  # hundreds of thousands of files take seconds; a hung filesystem must not hang the host forever


def _run(argv: list[str], what: str, timeout: float) -> bool:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        logger.warning("%s failed: %s", what, e)
        return False
    if done.returncode != 0:
        logger.warning("%s exited with %d: %s", what, done.returncode,
                       done.stderr.decode("utf-8", "replace").strip()[-500:])
        return False
    return True


def mounts_below(path: str | os.PathLike) -> list[str]:
    """Mount points at or below `path` (from /proc/self/mountinfo), deepest first."""
    root = os.path.abspath(os.fspath(path))
    found = []
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            for line in f:
                point = line.split(b" ")[4].decode("utf-8", "surrogateescape")
                # mountinfo escapes space, tab, newline and backslash as octal
                point = point.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
                if point == root or point.startswith(root.rstrip("/") + "/"):
                    found.append(point)
    except OSError:
        return []
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def unmount_below(path: str | os.PathLike) -> bool:
    """Detach (a lazy umount) every filesystem mounted at or below `path`: a sandbox's capped disk or /tmp that a
    crashed owner left. True when none is left."""
    from slime.agentic import mount_calls

    for point in mounts_below(path):
        try:
            mount_calls.unmount(point, lazy=True)
        except OSError as e:
            logger.warning("unmounting %r failed: %s", point, e)
    return not mounts_below(path)


def remove_tree(path: str | os.PathLike, timeout: float = TIMEOUT_S) -> bool:
    """`rm -rf --one-file-system PATH` (a symlink at PATH itself is removed, not followed), after detaching whatever
    is mounted below it (a sandbox's own disk). True when nothing is left; a missing path is already removed."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        return True
    try:  # the common case, an empty directory (a work directory whose disk is unmounted), without a process
        os.rmdir(path)  # never follows a symlink at `path` (ENOTDIR); a mount point is EBUSY
        return True
    except OSError:
        pass
    if not os.path.islink(path) and mounts_below(path):
        unmount_below(path)
    _run(["rm", "-rf", "--one-file-system", "--", path], f"removing {path!r}", timeout)
    return not os.path.lexists(path)


def chown_tree(path: str | os.PathLike, uid: int, gid: int, timeout: float = TIMEOUT_S) -> bool:
    """`chown -R -h -P UID:GID PATH`: the tree's own entries, symlinks changed themselves, never followed."""
    path = os.fspath(path)
    try:  # the common case, a new empty work directory, without a process
        if not os.path.islink(path) and os.path.isdir(path):
            with os.scandir(path) as entries:
                if next(entries, None) is None:
                    os.lchown(path, int(uid), int(gid))
                    return True
    except OSError:
        pass
    return _run(["chown", "-R", "-h", "-P", f"{int(uid)}:{int(gid)}", "--", path], f"chowning {path!r}", timeout)


def strip_dangerous_modes(path: str | os.PathLike, timeout: float = TIMEOUT_S) -> bool:
    """Clear the set-user-id and set-group-id bits and write permission for others on every entry below PATH
    (symlinks aside): a directory handed back to its owner keeps no setgid directory or world-writable file an agent
    made for whoever uses it next."""
    return _run(["find", os.fspath(path), "-xdev", "!", "-type", "l", "(", "-perm", "-4000", "-o", "-perm", "-2000",
                 "-o", "-perm", "-0002", ")", "-exec", "chmod", "u-s,g-s,o-w", "--", "{}", "+"],
                f"clearing setuid/setgid/world-writable modes under {os.fspath(path)!r}", timeout)


def empty_directory(path: str | os.PathLike, timeout: float = TIMEOUT_S) -> None:
    """Remove every entry of `path` (the directory itself stays): subtrees with :func:`remove_tree`, the rest
    unlinked (a symlink itself, never its target)."""
    for entry in list(os.scandir(path)):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path, timeout)  # an empty one (bwrap's mount point in /tmp) without a process
        else:
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                pass
