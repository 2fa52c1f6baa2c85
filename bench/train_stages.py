"""What the learning benchmarks share: run a setting's own CPU script as a user runs it (progress passed through,
the whole output kept in a log), read the evaluations its trainer logged, find the weights it ended with.

Used by `toolcall_learning.py` and `terminal_learning.py` (scripts in this folder import it as a sibling).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_stage(tag: str, script: str, env: dict, flags: list[str], log: Path) -> float:
    """`bash script flags...` from the repository root with `env` added; the trainer's step and evaluation lines
    (and any error line) are echoed with `[tag]`, everything goes to `log`. Returns the wall seconds; a non-zero
    exit ends the benchmark with the log's path."""
    started = time.monotonic()
    print(f"[{tag}] bash {script} {' '.join(flags)}  (log: {log})", flush=True)
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(["bash", script, *flags], cwd=REPO, env={**os.environ, **env}, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:  # the scripts' own progress lines, passed through
            fh.write(line)
            if line.startswith(("step ", "eval after")) or "Error" in line or "error:" in line:
                print(f"[{tag}] {line.rstrip()[:400]}", flush=True)
        code = proc.wait()
    if code != 0:
        raise SystemExit(f"[{tag}] exited with {code}; see {log}")
    return time.monotonic() - started


def eval_records(run_dir: Path) -> list[dict]:
    """The evaluation records of a run's metrics.jsonl (`eval/...` keys), in order."""
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r for r in rows if "eval/rollout_id" in r]


def eval_sample_files(run_dir: Path, dataset: str = "heldout") -> list[Path]:
    """Every evaluation's dumped samples (`<run dir>/eval/<when>/<dataset>.jsonl`), before training first."""
    folder = run_dir / "eval"
    files = sorted(folder.glob(f"rollout_*/{dataset}.jsonl"))
    before = folder / "before_training" / f"{dataset}.jsonl"
    return ([before] if before.exists() else []) + files


def last_model(ckpt: Path) -> Path:
    """The HF model folder of the last checkpoint under `ckpt` (what a next stage starts from)."""
    folders = sorted(p for p in ckpt.glob("iter_*") if (p / "model" / "config.json").exists())
    if not folders:
        raise SystemExit(f"no checkpoint with a model folder under {ckpt}")
    return folders[-1] / "model"
