"""Where the framework keeps things that must live outside the repository (converted models, tiny test models)."""

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """`$SLIME_CACHE_DIR`, else `$XDG_CACHE_HOME/slime`, else `~/.cache/slime`."""
    explicit = os.environ.get("SLIME_CACHE_DIR")
    if explicit:
        root = Path(explicit)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slime"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def atomic_directory(final: Path):
    """Build a directory in a temporary sibling and move it into place only if the build succeeds.

    Several processes (pytest workers, torchrun ranks) may build the same cached model at once; the
    rename makes exactly one complete copy visible and never a half-written one.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        yield tmp
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.exists():  # a different failure than "somebody else finished first"
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
