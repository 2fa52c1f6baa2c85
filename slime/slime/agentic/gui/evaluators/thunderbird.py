"""OSWorld's Thunderbird preferences metric (``desktop_env/evaluators/metrics/thunderbird.py``:
``check_thunderbird_prefs``) over a profile's ``prefs.js``, where each line is ``user_pref("key", <JSON value>);``.
Every key of ``expect`` must be present with a value its rule matches (the last line of a key counts), and no key
of ``unexpect`` may have a value its rule matches; rules are OSWorld's ``{method, ref}`` (``eq``, ``re.S``, ...: the
same matcher as ``compare_table``'s ``check_cell``). A missing file scores 0."""

from __future__ import annotations

import json
import re

from .table import match_value_to_rule

_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)\", (?P<val>.+)\);$')


def read_prefs(path: str) -> list[tuple[str, object]]:
    """(key, value) of every user_pref line, in order; a line whose value is not JSON is skipped."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PREF.match(line.strip())
            if m is None:
                continue
            try:
                out.append((m.group("key"), json.loads(m.group("val"))))
            except json.JSONDecodeError:
                continue
    return out


def check_thunderbird_prefs(result: str | None, rule: dict) -> float:
    if result is None:
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    met = {key: False for key in expect}
    clean = True
    for key, value in read_prefs(result):
        if key in expect:
            met[key] = match_value_to_rule(value, expect[key])
        elif key in unexpect:
            clean = clean and not match_value_to_rule(value, unexpect[key])
    return float(all(met.values()) and clean)


__all__ = ["check_thunderbird_prefs", "read_prefs"]
