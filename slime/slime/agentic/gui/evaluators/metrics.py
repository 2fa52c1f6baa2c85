"""OSWorld's metric functions, by name (``desktop_env/evaluators/metrics``): each takes what the task's getters
return (a result, then the expected value when the task has one, then the evaluator's options) and gives a score in
[0, 1]. A result of None (a file the desktop lacks) scores 0. Files come as local paths (the ``vm_file`` and
``cloud_file`` getters' convention), text as text. The semantics are OSWorld's, including where they are strict
(``exact_match`` compares exactly; ``check_json_settings`` reads its keys at the top level of the file's object,
so VS Code's ``editor.wordWrapColumn`` is one key). ``check_lines`` and ``check_output_lines`` are this project's.
The office metrics live in their own modules, named as OSWorld's: ``table.py`` (``compare_table``, ``compare_csv``),
``docs.py`` (``compare_docx_files``, ``compare_docx_tables``), ``slides.py`` (``compare_pptx_files``),
``images.py`` (``compare_images``), ``pdf.py`` (``compare_pdfs``), and the apps' settings: ``vlc.py`` (VLC's
``vlcrc`` options), ``gimp.py`` (``check_config_status``), ``thunderbird.py`` (``check_thunderbird_prefs``), and
``chrome.py`` (the tabs, with its getters).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from typing import Any

from .chrome import CHROME_METRICS
from .docs import DOCX_OPTIONS, compare_docx_files, compare_docx_tables
from .gimp import check_config_status
from .images import IMAGE_OPTIONS, compare_images
from .pdf import compare_pdfs
from .slides import PPTX_OPTIONS, compare_pptx_files
from .table import compare_csv, compare_table, unsupported_table_rules
from .thunderbird import check_thunderbird_prefs
from .vlc import VLC_METRICS


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def exact_match(result, rules) -> float:
    return float(result == rules["expected"])


def match_in_list(result, rules) -> float:
    return float(result in rules["expected"])


def is_in_list(result, rules) -> float:
    return float(rules["expected"] in result)


def literal_match(result: Any, expected: Any, **options) -> float:
    kind, fold = options.get("type", "str"), options.get("ignore_case", False)
    norm = (lambda v: str(v).lower()) if fold else str
    if kind == "str":
        return float(norm(result) == norm(expected))
    if kind == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)):
            return 0.0
        return float([norm(v) for v in result] == [norm(v) for v in expected])
    raise ValueError(f"literal_match: type {kind!r} is not supported")


def check_include_exclude(result, rules) -> float:
    if result is None:
        return 0.0
    include, exclude = rules.get("include", []), rules.get("exclude", [])
    return float(all(s in result for s in include) and all(s not in result for s in exclude))


def check_list(result: str | None, rules) -> float:
    """`result`: a file; every `expect` regex matches some line and no `unexpect` regex matches any."""
    if result is None:
        return 0.0
    expect = [re.compile(p) for p in rules.get("expect", [])]
    unexpect = [re.compile(p) for p in rules.get("unexpect", [])]
    lines = _read(result).splitlines()
    found = [any(p.search(line) for line in lines) for p in expect]
    clean = not any(p.search(line) for p in unexpect for line in lines)
    return float(all(found) and clean)


def check_json_settings(actual: str | None, expected, **options) -> float:
    """`actual`: a JSON file; every key of expected["expected"] is a top-level key holding that value."""
    if not actual:
        return 0.0
    try:
        data = json.loads(_read(actual))
    except (OSError, json.JSONDecodeError):
        return 0.0
    if not isinstance(data, dict):
        return 0.0
    return float(all(key in data and data[key] == value for key, value in expected["expected"].items()))


def check_direct_json_object(result, rules) -> float:
    """`result`: a JSON object (or its text, single quotes read as double). Every expected key holds the expected
    value (lists compared as sets when `ignore_list_order`); with `expect_in_result`, a listed value must be one of
    the result's (or equal its string) and a string value must occur in the result's string."""
    try:
        if isinstance(result, str):
            result = json.loads(result.strip().replace("'", '"'))
        if result is None:
            return 0.0
        expected = rules["expected"]
        if any(v == "__EVALUATION_FAILED__" for v in expected.values()):
            return 0.0
        if not rules.get("expect_in_result", False):
            for key, want in expected.items():
                got = result.get(key)
                if expected.get("ignore_list_order", False):
                    if sorted(want) != sorted(got):
                        return 0.0
                elif want != got:
                    return 0.0
            return 1.0
        for key, want in expected.items():
            got = result.get(key)
            if isinstance(want, list):
                if not any((isinstance(got, list) and w in got) or (isinstance(got, str) and w == got) for w in want):
                    return 0.0
            elif isinstance(want, str):
                if want not in got:
                    return 0.0
            else:
                return 0.0
        return 1.0
    except Exception:  # noqa: BLE001 - as OSWorld: a result that is not the object expected scores 0
        return 0.0


def compare_text_file(actual: str | None, expected: str, **options) -> float:
    """Two files' texts equal, after collapsing whitespace (`ignore_blanks`) and case (`ignore_case`)."""
    if not actual:
        return 0.0
    texts = [_read(actual), _read(expected)]
    if options.get("ignore_blanks", False):
        texts = [re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", t).strip()) for t in texts]
    if options.get("ignore_case", False):
        texts = [t.lower() for t in texts]
    return float(texts[0] == texts[1])


def diff_text_file(result: str | None, expect: str) -> float:
    """The similarity ratio of two files' lines."""
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(a=_read(result).splitlines(), b=_read(expect).splitlines()).ratio()


def is_expected_url_pattern_match(result, rules) -> float:
    """Every regex of rules["expected"] is found in the URL (`result` is the URL or an object with `url`)."""
    if not result:
        return 0.0
    url = result if isinstance(result, str) else result.get("url") if isinstance(result, dict) else None
    if url is None:
        return 0.0
    return float(all(re.search(pattern, url) for pattern in rules["expected"]))


def is_extension_installed(actual: str, rules, **options) -> float:
    if rules["type"] == "contain":
        return float(rules["expected"] in actual)
    if rules["type"] == "not_contain":
        return float(rules["expected"] not in actual)
    raise ValueError(f"is_extension_installed: type {rules['type']!r} is not supported")


def check_lines(result: str | None, rules) -> float:
    """Ours: the file's non-empty lines, stripped, are rules["expected"]."""
    if result is None:
        return 0.0
    return check_output_lines(_read(result), rules)


def check_output_lines(result: str | None, rules) -> float:
    """Ours: the text's non-empty lines (a command's output), stripped, are rules["expected"]."""
    if result is None:
        return 0.0
    return float([line.strip() for line in str(result).splitlines() if line.strip()] == list(rules.get("expected", [])))


METRICS: dict[str, Callable[..., float]] = {f.__name__: f for f in (
    exact_match, match_in_list, is_in_list, literal_match, check_include_exclude, check_list, check_json_settings,
    check_direct_json_object, compare_text_file, diff_text_file, is_expected_url_pattern_match,
    is_extension_installed, check_lines, check_output_lines, compare_table, compare_csv, compare_docx_files,
    compare_docx_tables, compare_pptx_files, compare_images, compare_pdfs, check_config_status,
    check_thunderbird_prefs, *VLC_METRICS, *CHROME_METRICS)}
METRICS["infeasible"] = lambda *args, **kwargs: 0.0  # decided by the agent's last action (tasks.evaluate), never here


def _unknown_options(accepted) -> Callable[[dict], list[str]]:
    return lambda options: [f"option {k!r}" for k in sorted(set(options) - set(accepted))]


# what a metric's options may ask for that is not implemented here (checked when a task loads, so such a task is
# reported as not runnable instead of being scored by a comparison it did not ask for)
OPTION_CHECKS: dict[str, Callable[[dict], list[str]]] = {
    "compare_table": lambda options: [f"rule {r!r}" for r in unsupported_table_rules(options)],
    "compare_docx_files": _unknown_options(DOCX_OPTIONS),
    "compare_pptx_files": _unknown_options(PPTX_OPTIONS),
    "compare_images": _unknown_options(IMAGE_OPTIONS),
    "compare_pdfs": _unknown_options(()),
    "compare_docx_tables": _unknown_options(()),
}


def unsupported_options(func: str, options: dict | None) -> list[str]:
    """What of `options` the metric `func` does not implement (empty: all of it)."""
    check = OPTION_CHECKS.get(func)
    return check(options or {}) if check is not None else []

__all__ = ["METRICS", "OPTION_CHECKS", "unsupported_options", *sorted(n for n in METRICS if n != "infeasible")]
