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


def remove_tree(path: str | os.PathLike, timeout: float = TIMEOUT_S) -> bool:
    """`rm -rf --one-file-system PATH` (a symlink at PATH itself is removed, not followed). True when nothing is left;
    a missing path is already removed."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        return True
    _run(["rm", "-rf", "--one-file-system", "--", path], f"removing {path!r}", timeout)
    return not os.path.lexists(path)


def chown_tree(path: str | os.PathLike, uid: int, gid: int, timeout: float = TIMEOUT_S) -> bool:
    """`chown -R -h -P UID:GID PATH`: the tree's own entries, symlinks changed themselves, never followed."""
    return _run(["chown", "-R", "-h", "-P", f"{int(uid)}:{int(gid)}", "--", os.fspath(path)],
                f"chowning {os.fspath(path)!r}", timeout)


def strip_dangerous_modes(path: str | os.PathLike, timeout: float = TIMEOUT_S) -> bool:
    """Clear the set-user-id and set-group-id bits and write permission for others on every entry below PATH
    (symlinks aside): a directory handed back to its owner keeps no setgid directory or world-writable file an agent
    made for whoever uses it next."""
    return _run(["find", os.fspath(path), "-xdev", "!", "-type", "l", "(", "-perm", "-4000", "-o", "-perm", "-2000",
                 "-o", "-perm", "-0002", ")", "-exec", "chmod", "u-s,g-s,o-w", "--", "{}", "+"],
                f"clearing setuid/setgid/world-writable modes under {os.fspath(path)!r}", timeout)
