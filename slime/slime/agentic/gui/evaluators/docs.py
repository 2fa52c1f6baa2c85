"""OSWorld's document metrics ``compare_docx_files`` and ``compare_docx_tables``
(``desktop_env/evaluators/metrics/docs.py``), with their semantics.

``compare_docx_files(result, expected, **options)`` compares two documents' paragraph texts (both .docx, read with
python-docx, or both .odt, read with odfpy; anything else scores 0):

    ignore_blanks (True)      the documents' texts joined and whitespace runs collapsed, compared whole; without it
                              paragraph by paragraph (the counts must match)
    ignore_case (False)       lower-cased first
    ignore_order (False)      paragraphs sorted first
    delete_empty_lines (False) empty paragraphs dropped (after sorting)
    content_only (False)      the rapidfuzz ratio of the collapsed texts, in [0, 1], whatever else is set
    fuzzy_match (False)       a ratio instead of equality: of the whole text with `ignore_blanks`, else the mean
                              ratio of paragraph pairs

``compare_docx_tables(result, expected)``: the two .docx files have as many tables, each with as many rows and columns,
and every cell's text, stripped, is the same.

A result that is missing or does not open scores 0. Unknown options raise (a task asking for a comparison not made
here must not be scored as if it were).
"""

from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

DOCX_OPTIONS = {"ignore_blanks": True, "ignore_case": False, "ignore_order": False, "content_only": False,
                "fuzzy_match": False, "delete_empty_lines": False}


def _docx_paragraphs(path: str) -> list[str]:
    from docx import Document

    return [p.text for p in Document(path).paragraphs]


def _odt_paragraphs(path: str) -> list[str]:
    """Each text:p's own text and the text directly inside its spans (what OSWorld reads of an .odt)."""
    from odf.opendocument import load
    from odf.text import P

    out = []
    for para in load(path).getElementsByType(P):
        parts = []
        for node in para.childNodes:
            if node.nodeType == node.TEXT_NODE:
                parts.append(node.data)
            elif node.nodeType == node.ELEMENT_NODE and node.tagName == "text:span":
                parts += [c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE]
        out.append("".join(parts))
    return out


def _paragraphs(path: str) -> list[str] | None:
    if path.endswith(".docx"):
        return _docx_paragraphs(path)
    if path.endswith(".odt"):
        return _odt_paragraphs(path)
    return None


def _collapsed(paragraphs: list[str], fold: bool) -> str:
    text = re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()
    return text.lower() if fold else text


def _ratio(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) / 100.0


def compare_docx_files(result: str | None, expected: str | None, **options) -> float:
    unknown = sorted(set(options) - set(DOCX_OPTIONS))
    if unknown:
        raise ValueError(f"compare_docx_files: options not implemented: {', '.join(unknown)}")
    opt = {**DOCX_OPTIONS, **options}
    if not result or not expected:
        return 0.0
    if result.rsplit(".", 1)[-1] != expected.rsplit(".", 1)[-1]:
        return 0.0  # OSWorld compares a .docx with a .docx and an .odt with an .odt only
    try:
        ours, theirs = _paragraphs(result), _paragraphs(expected)
    except Exception as e:  # noqa: BLE001 - a document that does not open (a broken save) scores 0, as OSWorld
        logger.info("compare_docx_files: cannot read %s or %s: %s", result, expected, e)
        return 0.0
    if ours is None or theirs is None:
        return 0.0
    if opt["ignore_order"]:
        ours, theirs = sorted(ours), sorted(theirs)
    if opt["delete_empty_lines"]:
        ours, theirs = [p for p in ours if p.strip()], [p for p in theirs if p.strip()]
    fold = opt["ignore_case"]
    if opt["content_only"]:
        return _ratio(_collapsed(ours, fold), _collapsed(theirs, fold))
    if opt["ignore_blanks"]:
        a, b = _collapsed(ours, fold), _collapsed(theirs, fold)
        if opt["fuzzy_match"]:
            return _ratio(a, b)
        return float(a == b)
    if len(ours) != len(theirs):
        return 0.0
    if fold:
        ours, theirs = [p.lower() for p in ours], [p.lower() for p in theirs]
    if opt["fuzzy_match"]:
        return sum(_ratio(a, b) for a, b in zip(ours, theirs)) / len(ours) if ours else 1.0
    return float(ours == theirs)


def _table_cells(path: str) -> list[list[list[str]]]:
    from docx import Document

    return [[[table.cell(i, j).text.strip() for j in range(len(table.columns))] for i in range(len(table.rows))]
            for table in Document(path).tables]


def compare_docx_tables(result: str | None, expected: str | None) -> float:
    if not result or not expected:
        return 0.0
    try:
        ours, theirs = _table_cells(result), _table_cells(expected)
    except Exception as e:  # noqa: BLE001 - a document that does not open scores 0, as OSWorld
        logger.info("compare_docx_tables: cannot read %s or %s: %s", result, expected, e)
        return 0.0
    return float(ours == theirs)  # same count, shapes and stripped cell texts


__all__ = ["DOCX_OPTIONS", "compare_docx_files", "compare_docx_tables"]
