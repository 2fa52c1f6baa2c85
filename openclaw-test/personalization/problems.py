"""The problem set the simulated users ask about: grade-school math word problems shipped in the repo
(`data/problems.json`, written by `problem_templates.py`), split into "train", "heldout" (same templates as train) and "ood" (templates training never sees)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Problem", "load_problems"]

SPLITS = ("train", "heldout", "ood")
DEFAULT_FILE = Path(__file__).with_name("data") / "problems.json"


@dataclass(frozen=True)
class Problem:
    id: str
    question: str
    answer: int
    split: str  # "train" | "heldout" | "ood"


def load_problems(split: str | None = None, path: str | Path | None = None) -> list[Problem]:
    """Problems of one split ("train", "heldout", "ood") or all, in file order."""
    if split not in (None, *SPLITS):
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    rows = json.loads(Path(path or DEFAULT_FILE).read_text())
    problems = [Problem(id=r["id"], question=r["question"], answer=int(r["answer"]), split=r["split"]) for r in rows]
    return [p for p in problems if split is None or p.split == split]
