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


def check_save_folder(parser: argparse.ArgumentParser, save: Path, force: bool) -> None:
    if save.exists() and (not save.is_dir() or (any(save.iterdir()) and not force)):
        parser.error(f"--save {save}: {'not a folder' if not save.is_dir() else 'not empty (use --force)'}")


def resolve_hf_checkpoint(parser: argparse.ArgumentParser, ref: str) -> Path:
    """An HF folder, or a built-in model name the framework builds or converts."""
    from slime.models import resolve_model_path

    try:
        return Path(resolve_model_path(ref))
    except FileNotFoundError as exc:
        missing = not Path(ref).expanduser().exists()
        parser.error(f"--hf-checkpoint {ref}: "
                     + ("no such folder, and not a built-in model name (tiny, smollm2)" if missing else str(exc)))
