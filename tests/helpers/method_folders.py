"""The method folders at the top of the checkout: each holds its method as modules of its own."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAMES = ("openclaw-rl", "openclaw-opd", "openclaw-combine", "openclaw-test", "terminal-rl", "gui-rl", "swe-rl",
         "toolcall-rl")
METHOD_FOLDERS = tuple(REPO / name for name in NAMES)
