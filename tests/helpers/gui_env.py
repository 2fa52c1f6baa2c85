"""What the GUI tests share (imported by them): the skip marks for hosts without the bubblewrap sandbox or the desktop
tools (scripts/setup_gui.sh installs the tools)."""

from __future__ import annotations

import shutil

import pytest

from slime.agentic import sandbox as sb

_CAP = sb.detect_capability("bwrap")


def requires_desktop(*tools: str) -> list:
    """Marks that skip a test module without the sandbox or one of the desktop tools (Xvfb, xdotool, tesseract,
    and the extra `tools`, e.g. chromium)."""
    missing = [t for t in ("Xvfb", "xdotool", "tesseract", *tools) if shutil.which(t) is None]
    return [pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}"),
            pytest.mark.skipif(bool(missing), reason=f"missing {', '.join(missing)} (bash scripts/setup_gui.sh)")]
