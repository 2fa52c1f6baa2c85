"""The problem set the simulated users ask about: grade-school math word problems shipped in the repo
(`data/problems.json`, written by `problem_templates.py`), split into "train" and "heldout"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Problem", "load_problems"]

DEFAULT_FILE = Path(__file__).with_name("data") / "problems.json"


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: int
    split: str  # "train" | "heldout"


def load_problems(split: str | None = None, path: str | Path | None = None) -> list[Problem]:
    """Problems of one split ("train", "heldout") or all, in file order."""
    if split not in (None, "train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    rows = json.loads(Path(path or DEFAULT_FILE).read_text())
    problems = [Problem(id=r["id"], question=r["question"], answer=int(r["answer"]), split=r["split"]) for r in rows]
    return [p for p in problems if split is None or p.split == split]
