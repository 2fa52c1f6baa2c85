"""scripts/run_digits_gpu.sh where no GPU is: it says so and starts nothing; an unknown mode is refused.

(The runs themselves were checked on an H100: scripts/README.md.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_digits_gpu.sh"


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "SKIP_SETUP": "1", "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=REPO, env=full_env, capture_output=True, text=True,
                          timeout=120)


def test_without_a_cuda_device_it_says_so_and_trains_nothing():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    done = _run("sync")
    assert done.returncode != 0
    assert "torch sees no CUDA device" in done.stderr
    assert "run_digits_gpu] sync" not in done.stdout


def test_an_unknown_mode_is_refused():
    done = _run("fast")
    assert done.returncode == 2 and "unknown mode fast" in done.stderr
