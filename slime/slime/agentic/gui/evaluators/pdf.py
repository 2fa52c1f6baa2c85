"""OSWorld's PDF metric ``compare_pdfs`` (``desktop_env/evaluators/metrics/chrome.py``), with its semantics.

``compare_pdfs(result, expected)`` scores how close two PDFs' texts are, in [0, 1]: each file's text is read page
by page, the pages concatenated and the whole stripped, and the score is rapidfuzz's ``fuzz.ratio / 100`` of the
two texts. ``expected`` decides the shape, as in OSWorld: a single path compares one pair; a list of paths pairs
``result[i]`` with ``expected[i]`` and averages over ``len(expected)``, a pair that cannot be read (either side)
adding 0, and expected files without a result counterpart adding 0 too.

Differences from OSWorld:

* The text is extracted with pypdf (BSD), not PyMuPDF (AGPL), which this project does not ship. Both files go
  through the same extractor, so the comparison keeps its meaning and identical files still score 1.0, but the two
  extractors lay text out differently (spacing, line breaks, reading order), so a partial score on a given pair of
  files can differ somewhat from the number OSWorld would report. Each page's text is followed by a newline, as
  PyMuPDF's ``get_text()`` ends every line with one, so words on adjacent pages are not glued together. An
  encrypted file is opened with the empty password, as PyMuPDF does on its own.
* A None result scores 0 (OSWorld would open an empty new document for None, or fail on a None list), as does a
  single result paired with a list of expected files; an empty expected list raises ValueError (OSWorld divides by
  zero there).
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def _pdf_text(path: str) -> str:
    from pypdf import PdfReader

    if not path:
        raise ValueError("no file")  # pypdf would not say why; the caller scores this pair 0 either way
    reader = PdfReader(path)
    if reader.is_encrypted:
        reader.decrypt("")  # PyMuPDF tries the empty password by itself; without it no page text is readable
    return "".join(page.extract_text() + "\n" for page in reader.pages).strip()


def _pair_score(result: str | None, expected: str) -> float:
    from rapidfuzz import fuzz

    try:
        ours, theirs = _pdf_text(result), _pdf_text(expected)
    except Exception as e:  # noqa: BLE001 - as OSWorld, a pair that does not read (a broken or absent file) adds 0
        logger.info("compare_pdfs: cannot read %s or %s: %s", result, expected, e)
        return 0.0
    return fuzz.ratio(ours, theirs) / 100.0


def compare_pdfs(result: str | list[str] | None, expected: str | list[str]) -> float:
    if result is None:
        return 0.0
    if not isinstance(expected, list):
        return _pair_score(result, expected)
    if not expected:
        raise ValueError("compare_pdfs: the expected list is empty")
    if not isinstance(result, list):
        return 0.0  # OSWorld would zip the path's characters against the list, and none of those pairs reads
    # zip stops at the shorter list; dividing by len(expected) makes every expected file without a result count 0
    return sum(_pair_score(r, e) for r, e in zip(result, expected)) / len(expected)


__all__ = ["compare_pdfs"]
