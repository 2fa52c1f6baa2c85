"""The README's main job, as a user runs it: SmolLM2 converted from its PyPI wheel, served, answering."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_main_job_answers_one_chat_request_on_the_embedded_default():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "main_job.py"), "--max-tokens", "24"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    answer = next(line for line in lines if line.startswith("[main] assistant:"))
    assert len(answer.removeprefix("[main] assistant:").strip()) > 0
    assert any("weight_version=0" in line for line in lines)
    assert lines[-1] == "[main] engine stopped"
