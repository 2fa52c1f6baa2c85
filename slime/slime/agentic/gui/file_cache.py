"""The files OSWorld's tasks download, from a local directory a user fills (no network here).

OSWorld's controller downloads a task's files once into ``cache/<task id>/`` and reuses them; this reads the same
layout, so an OSWorld cache directory works unchanged (``--cache DIR`` / the provider's ``file_cache``)::

    <root>/<task id>/<uuid5(NAMESPACE_URL, url)>_<basename(path)>   a setup step's download {url, path}
    <root>/<task id>/<dest>                                          an evaluator's cloud_file {path: url, dest}

A missing file is an error naming the file the cache should hold and the URL it stands for
(:class:`MissingCachedFile`), never a download.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


class MissingCachedFile(FileNotFoundError):
    """The cache lacks a task's file; the message names where it should be and the URL it stands for."""


def _plain_name(name: str, what: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{what} {name!r} is not a plain file name")
    return name


class FileCache:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise ValueError(f"file cache {self.root} is not a directory")

    def download_path(self, task_id: str, url: str, path: str) -> Path:
        """Where OSWorld caches the file a `download` step fetches from `url` for `path` on the desktop."""
        name = f"{uuid.uuid5(uuid.NAMESPACE_URL, url)}_{os.path.basename(path)}"
        return self.root / _plain_name(task_id, "task id") / _plain_name(name, "cached file")

    def cloud_path(self, task_id: str, dest: str) -> Path:
        """Where OSWorld caches an evaluator's cloud_file saved as `dest`."""
        return self.root / _plain_name(task_id, "task id") / _plain_name(dest, "cloud_file dest")

    def read(self, path: Path, url: str) -> bytes:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise MissingCachedFile(f"the file cache has no {path} (it stands for {url}): put that file there, "
                                    "or point --cache at an OSWorld cache directory that holds it") from None


__all__ = ["FileCache", "MissingCachedFile"]
