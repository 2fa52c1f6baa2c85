"""What both conversion tools share: the source tree on sys.path when slime is not installed, progress lines
with elapsed time, and reading an HF config with a clear error."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

try:
    import slime  # noqa: F401
except ImportError:  # not installed: use the source tree next to this folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "slime"))

STARTED = time.perf_counter()


def progress(prog: str, message: str) -> None:
    print(f"[{prog} {time.perf_counter() - STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


def read_hf_config(parser: argparse.ArgumentParser, hf_dir: Path):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(hf_dir)
    except (OSError, ValueError) as exc:  # unreadable JSON, unknown model_type, inconsistent values
        parser.error(f"--hf-checkpoint {hf_dir}: cannot read its config.json: {exc}")
