"""The shipped SFT traces are what the generator writes: every program ran in the real sandbox and printed the label;
the same command gives the same bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slime.agentic import sandbox as sb

REPO = Path(__file__).resolve().parents[2]
TOOLCALL = REPO / "toolcall-rl"
_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def test_regenerating_the_traces_gives_the_shipped_file(tmp_path):
    out = tmp_path / "sft_traces.jsonl"
    done = subprocess.run([sys.executable, str(TOOLCALL / "toolcall_traces.py"), "--problems",
                           "toolcall-rl/data/train.jsonl", "--out", str(out), "--n", "600", "--direct-share", "0.5",
                           "--seed", "0"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "600 traces (300 with a verified tool call, 300 direct)" in done.stdout
    assert out.read_bytes() == (REPO / "toolcall-rl/data/sft_traces.jsonl").read_bytes()
