"""Fixtures of this folder; the shared ones live in tests/helpers (tests/ is put on sys.path for them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from helpers.tool_model import build_tool_model  # noqa: E402


@pytest.fixture(scope="session")
def tool_model_path(tiny_model_path):
    """The tiny model fine-tuned to hold the get_weather conversation of helpers.tool_model (cached)."""
    return build_tool_model()
