"""Write a folder of files from a mapping (task fixtures in each format's layout)."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """`files` maps a relative path to its text (dedented, leading newline dropped); parents are created."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root
