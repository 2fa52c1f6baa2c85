"""OSWorld's compare_docx_files on documents written here (python-docx, odfpy): each option on a state that meets
it and one that does not."""

from __future__ import annotations

import pytest

docx = pytest.importorskip("docx")

from slime.agentic.gui.evaluators import METRICS  # noqa: E402
from slime.agentic.gui.evaluators.docs import compare_docx_files, compare_docx_tables  # noqa: E402

GOLD = ["Meeting notes", "", "Alice   will draft the plan.", "Bob reviews it."]


def document(path, paragraphs) -> str:
    doc = docx.Document()
    for text in paragraphs:
        doc.add_paragraph(text)
    doc.save(path)
    return str(path)


def odt(path, paragraphs) -> str:
    from odf.opendocument import OpenDocumentText
    from odf.text import P, Span

    doc = OpenDocumentText()
    for text in paragraphs:
        para = P()
        head, _, tail = text.partition(" ")
        para.addText(head + (" " if tail else ""))
        if tail:
            para.addElement(Span(text=tail))
        doc.text.addElement(para)
    doc.save(str(path))
    return str(path)


@pytest.fixture
def gold(tmp_path):
    return document(tmp_path / "gold.docx", GOLD)


def test_registered_by_osworld_name():
    assert METRICS["compare_docx_files"] is compare_docx_files
    assert METRICS["compare_docx_tables"] is compare_docx_tables


def test_same_text_scores_one_and_other_text_zero(tmp_path, gold):
    assert compare_docx_files(document(tmp_path / "same.docx", GOLD), gold) == 1.0
    assert compare_docx_files(document(tmp_path / "other.docx", GOLD[:3] + ["Bob review it."]), gold) == 0.0


def test_blanks_are_ignored_by_default_and_counted_without(tmp_path, gold):
    spaced = document(tmp_path / "spaced.docx", ["Meeting notes", "Alice will draft the plan.", "Bob reviews it."])
    assert compare_docx_files(spaced, gold) == 1.0  # whitespace runs, the empty paragraph included, collapse
    assert compare_docx_files(spaced, gold, ignore_blanks=False) == 0.0  # 3 paragraphs against 4
    assert compare_docx_files(spaced, gold, ignore_blanks=False, delete_empty_lines=True) == 0.0  # spaces differ
    exact = document(tmp_path / "exact.docx", ["Meeting notes", "Alice   will draft the plan.", "Bob reviews it."])
    assert compare_docx_files(exact, gold, ignore_blanks=False, delete_empty_lines=True) == 1.0


def test_case_and_order(tmp_path, gold):
    upper = document(tmp_path / "upper.docx", [p.upper() for p in GOLD])
    assert compare_docx_files(upper, gold) == 0.0
    assert compare_docx_files(upper, gold, ignore_case=True) == 1.0
    assert compare_docx_files(upper, gold, ignore_case=True, ignore_blanks=False) == 1.0
    shuffled = document(tmp_path / "shuffled.docx", [GOLD[3], GOLD[0], GOLD[2], GOLD[1]])
    assert compare_docx_files(shuffled, gold) == 0.0
    assert compare_docx_files(shuffled, gold, ignore_order=True) == 1.0


def test_fuzzy_and_content_only_give_ratios(tmp_path, gold):
    near = document(tmp_path / "near.docx", GOLD[:3] + ["Bob review it."])
    whole = compare_docx_files(near, gold, fuzzy_match=True)
    assert 0.9 < whole < 1.0
    assert compare_docx_files(near, gold, content_only=True) == pytest.approx(whole)
    per_paragraph = compare_docx_files(near, gold, fuzzy_match=True, ignore_blanks=False)
    assert 0.9 < per_paragraph < 1.0 and per_paragraph != pytest.approx(whole)
    assert compare_docx_files(document(tmp_path / "far.docx", ["x"]), gold, fuzzy_match=True) < 0.2


def test_odt_documents(tmp_path):
    gold = odt(tmp_path / "gold.odt", ["Meeting notes", "Bob reviews it."])
    assert compare_docx_files(odt(tmp_path / "same.odt", ["Meeting notes", "Bob reviews it."]), gold) == 1.0
    assert compare_docx_files(odt(tmp_path / "other.odt", ["Meeting notes", "Bob reviewed it."]), gold) == 0.0


def test_bad_results_score_zero_and_unknown_options_raise(tmp_path, gold):
    assert compare_docx_files(None, gold) == 0.0
    assert compare_docx_files(str(tmp_path / "absent.docx"), gold) == 0.0
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    assert compare_docx_files(str(tmp_path / "broken.docx"), gold) == 0.0
    assert compare_docx_files(odt(tmp_path / "mixed.odt", GOLD), gold) == 0.0  # a .docx against an .odt
    with pytest.raises(ValueError, match="examine_fonts"):
        compare_docx_files(gold, gold, examine_fonts=True)


def tables(path, *grids) -> str:
    doc = docx.Document()
    doc.add_paragraph("Prices")
    for grid in grids:
        table = doc.add_table(rows=len(grid), cols=len(grid[0]))
        for i, row in enumerate(grid):
            for j, text in enumerate(row):
                table.cell(i, j).text = text
    doc.save(path)
    return str(path)


def test_compare_docx_tables(tmp_path):
    gold = tables(tmp_path / "gold.docx", [["Item", "Price"], ["pen", "2"]], [["a"]])
    assert compare_docx_tables(tables(tmp_path / "same.docx", [["Item ", "Price"], ["pen", " 2"]], [["a"]]), gold) == 1.0
    assert compare_docx_tables(tables(tmp_path / "cell.docx", [["Item", "Price"], ["pen", "3"]], [["a"]]), gold) == 0.0
    assert compare_docx_tables(tables(tmp_path / "rows.docx", [["Item", "Price"]], [["a"]]), gold) == 0.0
    assert compare_docx_tables(tables(tmp_path / "one.docx", [["Item", "Price"], ["pen", "2"]]), gold) == 0.0
    assert compare_docx_tables(None, gold) == 0.0
    (tmp_path / "broken.docx").write_bytes(b"not a zip")
    assert compare_docx_tables(str(tmp_path / "broken.docx"), gold) == 0.0
