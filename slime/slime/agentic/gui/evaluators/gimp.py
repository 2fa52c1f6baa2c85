"""OSWorld's GIMP configuration metric (``desktop_env/evaluators/metrics/gimp.py``: ``check_config_status``) over
a file of GIMP's profile (``gimprc``, ``sessionrc``; the ``gimp_config_file`` getter copies
``~/.config/GIMP/2.10/<file_name>``). GIMP writes one S-expression per line, ``(undo-levels 100)``; OSWorld splits a
line on whitespace after the outer parentheses and compares its first word (or first two, for a list key) with the
key and its last word with the value, quotes included (``(theme "Light")`` has the value ``"Light"``). Comment and
empty lines are skipped; a missing file scores 0."""

from __future__ import annotations


def check_config_status(actual_config_path: str | None, rule: dict) -> float:
    if actual_config_path is None:
        return 0.0
    with open(actual_config_path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    key, value = rule["key"], rule["value"]
    for line in lines:
        if line.startswith("#") or line == "\n":
            continue
        words = line.strip().lstrip("(").rstrip(")\n").split()
        if not words:
            continue
        if isinstance(key, str) and words[0] == key and words[-1] == value:
            return 1.0
        if isinstance(key, list) and len(key) == 2 and words[:2] == key and words[-1] == value:
            return 1.0
    return 0.0


__all__ = ["check_config_status"]
