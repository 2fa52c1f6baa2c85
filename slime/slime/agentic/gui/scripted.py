"""Scripted GUI solutions: each shipped task's ``<id>.solution.json`` is a list of computer_use calls that solves it
through the same path as a policy (the provider's tool calls, the real desktop), checked by the tests and
``python -m slime.agentic.gui.check``.

A step is a computer_use ``arguments`` object, where a click-like step may give ``"target": "<text>"`` instead of a
coordinate: the line of the current observation's text view (the OCR of the screen) that reads the text, else the
first that contains it (case-insensitive), gives the coordinate, as a text policy would read it. ``"offset":
[dx, dy]`` (0-999 units) moves the point from the text's centre (e.g. into the entry field beside a label)."""

from __future__ import annotations

import json
from pathlib import Path

from .observation import parse_view_line
from .tasks import GuiTask



class SolutionError(RuntimeError):
    """A scripted step cannot be resolved on the current screen (its target text is not there)."""


def solution_path(task: GuiTask) -> Path:
    if task.path is None:
        raise SolutionError(f"task {task.key} has no folder")
    return task.path.with_name(f"{task.id}.solution.json")


def load_solution(task: GuiTask, path: Path | None = None) -> list[dict]:
    """The steps of `task`'s solution (beside the task, or at `path`)."""
    path = path or solution_path(task)
    data = json.loads(path.read_text(encoding="utf-8"))
    steps = data.get("steps") if isinstance(data, dict) else None
    if not isinstance(steps, list) or not all(isinstance(s, dict) and "action" in s for s in steps):
        raise SolutionError(f"{path}: 'steps' must be a list of computer_use arguments")
    return steps


def locate(text_view: str, target: str) -> tuple[int, int]:
    """The 0-999 centre of the text-view line that reads `target` (case-insensitive), else of the first line that
    contains it: a field's value such as a font size of 10 is its own line, while "100" above it also contains it."""
    wanted = target.lower()
    lines = [parsed for parsed in map(parse_view_line, text_view.splitlines()) if parsed]
    for text, x, y in [p for p in lines if p[0].lower() == wanted] or [p for p in lines if wanted in p[0].lower()]:
        return x, y
    raise SolutionError(f"no text {target!r} on the screen; the text view reads:\n{text_view[:1500]}")


def resolve(step: dict, text_view: str) -> dict:
    """The computer_use arguments of `step` on the screen whose text view is `text_view`."""
    args = {k: v for k, v in step.items() if k not in ("target", "offset")}
    if "target" in step:
        x, y = locate(text_view, step["target"])
        dx, dy = step.get("offset", (0, 0))
        args["coordinate"] = [min(999, max(0, x + dx)), min(999, max(0, y + dy))]
    return args


__all__ = ["SolutionError", "load_solution", "locate", "resolve", "solution_path"]
