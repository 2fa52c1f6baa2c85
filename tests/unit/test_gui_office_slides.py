"""OSWorld's compare_pptx_files on decks written here with python-pptx: each check on a pair of decks that differ in
that one property (0 with the check on, 1 with it off), OSWorld's leniencies, and decks that do not open."""

from __future__ import annotations

from pathlib import Path

import pytest

pptx = pytest.importorskip("pptx")

from pptx.dml.color import RGBColor  # noqa: E402
from pptx.enum.dml import MSO_THEME_COLOR  # noqa: E402
from pptx.enum.text import MSO_UNDERLINE, PP_ALIGN  # noqa: E402
from pptx.oxml.ns import qn  # noqa: E402
from pptx.util import Inches, Pt  # noqa: E402

from slime.agentic.gui.evaluators.slides import PPTX_OPTIONS, compare_pptx_files  # noqa: E402

# One deck, described by these values; a test changes one of them. Slide 1: a title and a body placeholder of two
# paragraphs, notes and a background. Slide 2: a text box, a picture, a table and a group holding a text box.
BASE = dict(
    slides=2, title="Quarterly review", title_top=None, text="Revenue grew", runs=1, font="Arial", size=20,
    bold=True, italic=None, rgb="112233", underline=None, strike=None, align=None, level=0, second_level=1,
    bullet=None, notes="Thank the team", background="F0F0F0", box_text="Plain text", box_left=1.0, box_width=4.0,
    picture_top=3.0, picture_width=2.0, picture_height=1.5, cell_text="Q1", cell_rgb="AA0000", cell_bold=True,
    columns=2, group_align=None, extra_shape=False, empty_run=False, theme_background=None, notes_body=True,
    table=True, box_xfrm=True, group_members=1, second="Costs fell", blank_para=None)


@pytest.fixture(scope="module")
def png(tmp_path_factory) -> str:
    from PIL import Image

    path = tmp_path_factory.mktemp("img") / "dot.png"
    Image.new("RGB", (8, 6), (200, 30, 30)).save(path)
    return str(path)


def _format_run(run, spec) -> None:
    font = run.font
    font.name, font.size, font.bold, font.italic = spec["font"], Pt(spec["size"]), spec["bold"], spec["italic"]
    if spec["rgb"]:
        font.color.rgb = RGBColor.from_string(spec["rgb"])
    font.underline = spec["underline"]
    if spec["strike"]:
        run._r.get_or_add_rPr().set("strike", spec["strike"])


def _title_slide(prs, spec) -> None:
    slide = prs.slides.add_slide(prs.slide_layouts[1])  # Title and Content
    slide.shapes.title.text = spec["title"]
    if spec["title_top"] is not None:
        slide.shapes.title.top = Inches(spec["title_top"])
    frame = slide.placeholders[1].text_frame
    first = frame.paragraphs[0]
    words = spec["text"].split(" ", 1)
    pieces = [spec["text"]] if spec["runs"] == 1 else [words[0] + " ", words[1]]
    for piece in pieces:
        run = first.add_run()
        run.text = piece
        _format_run(run, spec)
    first.alignment, first.level = spec["align"], spec["level"]
    if spec["bullet"]:
        first._p.get_or_add_pPr().append(first._p.makeelement(qn("a:buChar"), {"char": spec["bullet"]}))
    second = frame.add_paragraph()
    second.text, second.level = spec["second"], spec["second_level"]
    if spec["empty_run"]:
        second.add_run().text = ""  # saved as an empty <a:t/>
    if spec["blank_para"] is not None:  # a paragraph without text, holding that many empty runs
        blank = frame.add_paragraph()
        for _ in range(spec["blank_para"]):
            blank.add_run().text = ""
    slide.notes_slide.notes_text_frame.text = spec["notes"]
    if not spec["notes_body"]:
        body = slide.notes_slide.notes_placeholder.element
        body.getparent().remove(body)
    if spec["background"]:
        slide.background.fill.solid()
        slide.background.fill.fore_color.rgb = RGBColor.from_string(spec["background"])
    if spec["theme_background"]:
        slide.background.fill.solid()
        slide.background.fill.fore_color.theme_color = spec["theme_background"]


def _content_slide(prs, spec, png) -> None:
    slide = prs.slides.add_slide(prs.slide_layouts[6])  # Blank
    box = slide.shapes.add_textbox(Inches(spec["box_left"]), Inches(1), Inches(spec["box_width"]), Inches(1))
    box.text_frame.text = spec["box_text"]
    if not spec["box_xfrm"]:  # a shape whose position python-pptx reads as None
        box._element.spPr.remove(box._element.spPr.xfrm)
    slide.shapes.add_picture(png, Inches(5), Inches(spec["picture_top"]), Inches(spec["picture_width"]),
                             Inches(spec["picture_height"]))
    if spec["table"]:
        table = slide.shapes.add_table(2, spec["columns"], Inches(1), Inches(5), Inches(4), Inches(1)).table
        cell = table.cell(0, 0)
        cell.text = spec["cell_text"]
        run = cell.text_frame.paragraphs[0].runs[0]
        run.font.color.rgb, run.font.bold = RGBColor.from_string(spec["cell_rgb"]), spec["cell_bold"]
    else:  # a shape without text where the table was
        slide.shapes.add_picture(png, Inches(1), Inches(5), Inches(4), Inches(1))
    group = slide.shapes.add_group_shape()
    inner = group.shapes.add_textbox(Inches(6), Inches(6), Inches(2), Inches(1))
    inner.text_frame.text = "Grouped"
    inner.text_frame.paragraphs[0].alignment = spec["group_align"]
    for i in range(1, spec["group_members"]):
        group.shapes.add_textbox(Inches(6), Inches(6 + i), Inches(2), Inches(1)).text_frame.text = f"Grouped {i}"
    if spec["extra_shape"] == "text":
        slide.shapes.add_textbox(Inches(1), Inches(6.5), Inches(1), Inches(0.5)).text_frame.text = "Extra"
    elif spec["extra_shape"] == "picture":
        slide.shapes.add_picture(png, Inches(1), Inches(6.5), Inches(1), Inches(0.5))


def deck(path: Path, png: str, **changes) -> str:
    unknown = set(changes) - set(BASE)
    assert not unknown, unknown
    spec = {**BASE, **changes}
    prs = pptx.Presentation()
    _title_slide(prs, spec)
    _content_slide(prs, spec, png)
    for _ in range(spec["slides"] - 2):
        prs.slides.add_slide(prs.slide_layouts[6])
    prs.save(path)
    return str(path)


@pytest.fixture
def gold(tmp_path, png) -> str:
    return deck(tmp_path / "gold.pptx", png)


@pytest.fixture
def make(tmp_path, png):
    """make(**changes): a deck like gold's but for `changes`."""
    counter = iter(range(1000))
    return lambda **changes: deck(tmp_path / f"result{next(counter)}.pptx", png, **changes)


def test_identical_decks_score_one(make, gold):
    assert compare_pptx_files(make(), gold) == 1.0
    assert compare_pptx_files(gold, gold) == 1.0


def test_options_and_defaults_are_osworlds():
    flags_on = {"examine_number_of_slides", "examine_shape", "examine_text", "examine_indent", "examine_font_name",
                "examine_font_size", "examine_font_bold", "examine_font_italic", "examine_color_rgb",
                "examine_font_underline", "examine_strike_through", "examine_alignment", "examine_run_count",
                "examine_bullets", "examine_background_color", "examine_note", "enable_debug"}
    flags_off = {"examine_title_bottom_position", "examine_table_bottom_position", "examine_right_position",
                 "examine_top_position", "examine_shape_for_shift_size", "examine_image_size",
                 "examine_modify_height"}
    assert set(PPTX_OPTIONS) == flags_on | flags_off | {"approximately_tolerance"}
    assert all(PPTX_OPTIONS[k] is True for k in flags_on) and all(PPTX_OPTIONS[k] is False for k in flags_off)
    assert PPTX_OPTIONS["approximately_tolerance"] == 0.005


def test_unknown_option_raises_naming_it(gold):
    with pytest.raises(ValueError, match="examine_colour"):
        compare_pptx_files(gold, gold, examine_colour=True)
    with pytest.raises(ValueError, match="examine_shadow"):
        compare_pptx_files(None, gold, examine_shadow=False)  # raised before the result is looked at


def test_missing_or_unreadable_decks_score_zero(tmp_path, gold):
    text = tmp_path / "notes.pptx"
    text.write_text("not a presentation")
    assert compare_pptx_files(None, gold) == 0.0
    assert compare_pptx_files(gold, None) == 0.0
    assert compare_pptx_files(str(text), gold) == 0.0
    assert compare_pptx_files(str(tmp_path / "absent.pptx"), gold) == 0.0


# (what differs, the options that stop seeing it)
ONE_DIFFERENCE = {
    "number of slides": ({"slides": 3}, {"examine_number_of_slides": False}),
    "text": ({"text": "Revenue grows"}, {"examine_text": False, "examine_bullets": False}),
    "font name": ({"font": "Calibri"}, {"examine_font_name": False}),
    "font size": ({"size": 24}, {"examine_font_size": False}),
    "bold": ({"bold": False}, {"examine_font_bold": False}),
    "italic": ({"italic": True}, {"examine_font_italic": False}),
    "colour": ({"rgb": "FF0000"}, {"examine_color_rgb": False}),
    "underline": ({"underline": True}, {"examine_font_underline": False}),
    "strike-through": ({"strike": "sngStrike"}, {"examine_strike_through": False}),
    "alignment": ({"align": PP_ALIGN.CENTER}, {"examine_alignment": False}),
    "level": ({"level": 2}, {"examine_indent": False}),
    "run count": ({"runs": 2}, {"examine_run_count": False}),
    "position": ({"box_left": 1.5}, {"examine_shape": False}),
    "size": ({"box_width": 5.0}, {"examine_shape": False}),
    "background": ({"background": "000080"}, {"examine_background_color": False}),
    "notes": ({"notes": "Thank nobody"}, {"examine_note": False}),
    "bullet": ({"bullet": "\u2022"}, {"examine_bullets": False}),
    "table cell colour": ({"cell_rgb": "00AA00"}, {"examine_color_rgb": False}),
    "table cell text (bullets check only)": ({"cell_text": "Q2"}, {"examine_bullets": False}),
    "grouped text alignment": ({"group_align": PP_ALIGN.RIGHT}, {"examine_alignment": False}),
}


@pytest.mark.parametrize("changes, off", ONE_DIFFERENCE.values(), ids=ONE_DIFFERENCE.keys())
def test_each_check_sees_its_difference_and_only_its_option_hides_it(make, gold, changes, off):
    result = make(**changes)
    assert compare_pptx_files(result, gold) == 0.0
    assert compare_pptx_files(result, gold, **off) == 1.0


def test_text_is_also_compared_by_the_bullets_check(make, gold):
    assert compare_pptx_files(make(text="Revenue grows"), gold, examine_text=False) == 0.0


def test_paragraph_text_is_compared_exactly(make, gold):
    trailing = make(second="Costs fell ")  # the shape's text, stripped, is the same
    assert compare_pptx_files(trailing, gold, examine_bullets=False) == 0.0
    assert compare_pptx_files(trailing, gold, examine_bullets=False, examine_text=False) == 1.0


def test_underline_rules(make, tmp_path, png):
    off = deck(tmp_path / "off.pptx", png, underline=False)
    assert compare_pptx_files(make(underline=True), off) == 0.0  # two set values that differ
    assert compare_pptx_files(make(underline=MSO_UNDERLINE.DOUBLE_LINE), off) == 0.0
    # unset against a set value other than a single underline is not told apart (OSWorld's rule)
    assert compare_pptx_files(make(underline=MSO_UNDERLINE.DOUBLE_LINE), make()) == 1.0


def test_empty_runs_of_a_paragraph_without_text_do_not_count(make, tmp_path, png):
    expected = deck(tmp_path / "blank.pptx", png, blank_para=0)
    assert compare_pptx_files(make(blank_para=2), expected) == 1.0
    assert compare_pptx_files(make(blank_para=2), make(blank_para=0)) == 1.0


@pytest.mark.parametrize("changes", [
    {"underline": False},  # unset and off underline are alike
    {"rgb": None},  # a colour is compared only when both runs name an sRGB one
    {"second_level": 0},  # levels 0 and 1 are one indent
    {"align": PP_ALIGN.LEFT},  # unset alignment is left
    {"notes": "  Thank the team \n"},  # notes are stripped
    {"picture_top": 4.0},  # shapes without text (a picture) are exempt from examine_shape
], ids=["underline", "colour", "level", "alignment", "notes", "blank-shape-moved"])
def test_osworlds_leniencies_score_one(make, gold, changes):
    assert compare_pptx_files(make(**changes), gold) == 1.0


def test_unset_bold_and_italic_equal_off(make, tmp_path, png):
    expected = deck(tmp_path / "plain.pptx", png, bold=False, italic=False)
    assert compare_pptx_files(make(bold=None, italic=None), expected) == 1.0
    assert compare_pptx_files(make(bold=True, italic=None), expected) == 0.0


def test_table_cell_bold_is_compared_whatever_the_options(make, gold):
    assert compare_pptx_files(make(cell_bold=False), gold, examine_font_bold=False) == 0.0


def test_table_dimensions_and_shape_counts_always_compared(make, gold):
    everything_off = {k: False for k, v in PPTX_OPTIONS.items() if v is True}
    assert compare_pptx_files(make(columns=3), gold, **everything_off) == 0.0
    assert compare_pptx_files(make(extra_shape="text"), gold, **everything_off) == 0.0
    assert compare_pptx_files(make(extra_shape="picture"), gold, **everything_off) == 0.0
    assert compare_pptx_files(make(group_members=2), gold, **everything_off) == 0.0  # text shapes within groups
    assert compare_pptx_files(make(), gold, **everything_off) == 1.0


def test_background_falls_back_to_the_master(make, tmp_path, png):
    plain = deck(tmp_path / "plain.pptx", png, background=None)
    assert compare_pptx_files(make(background=None), plain) == 1.0
    assert compare_pptx_files(make(background="FFFFFF"), plain) == 0.0  # the master has no solid fill here


def test_approximately_tolerance(make, gold):
    nudged = make(box_left=1.001)  # 0.1 % further right
    assert compare_pptx_files(nudged, gold) == 1.0  # within the default 0.5 %
    assert compare_pptx_files(nudged, gold, approximately_tolerance=0.0001) == 0.0


def test_image_size(make, gold):
    wider = make(picture_width=2.5)
    assert compare_pptx_files(wider, gold) == 1.0  # a picture has no text: examine_shape lets it be
    assert compare_pptx_files(wider, gold, examine_image_size=True) == 0.0
    assert compare_pptx_files(make(picture_top=4.0), gold, examine_image_size=True) == 1.0  # pictures: size only


def test_modify_height(make, gold):
    taller = make(picture_height=2.0)
    assert compare_pptx_files(taller, gold) == 1.0
    assert compare_pptx_files(taller, gold, examine_modify_height=True) == 0.0
    # a shape without text is compared by its height alone, one with text by its whole box
    assert compare_pptx_files(make(picture_width=2.5), gold, examine_modify_height=True) == 1.0
    assert compare_pptx_files(make(box_width=5.0), gold, examine_shape=False, examine_modify_height=True) == 0.0


def test_top_position_wants_slide_twos_picture_moved_up(make, gold):
    assert compare_pptx_files(make(picture_top=2.0), gold, examine_top_position=True) == 1.0
    assert compare_pptx_files(make(), gold, examine_top_position=True) == 0.0
    assert compare_pptx_files(make(picture_top=2.5), gold, examine_top_position=True) == 0.0  # below 5.5 cm


def positioned(path: Path, png: str, slide_no: int, kind: str, left: float, top: float) -> str:
    """A deck of blank slides whose `slide_no`-th holds one picture or table at (left, top) inches."""
    prs = pptx.Presentation()
    slides = [prs.slides.add_slide(prs.slide_layouts[6]) for _ in range(slide_no)]
    if kind == "picture":
        slides[-1].shapes.add_picture(png, Inches(left), Inches(top), Inches(2), Inches(1))
    else:
        slides[-1].shapes.add_table(2, 2, Inches(left), Inches(top), Inches(3), Inches(1))
    prs.save(path)
    return str(path)


@pytest.mark.parametrize("left, score", [(6.0, 1.0), (4.0, 0.0), (2.0, 0.0)])  # 12 cm is 4.72 in
def test_right_position_wants_slide_twos_textless_shapes_moved_right(tmp_path, png, left, score):
    expected = positioned(tmp_path / "e.pptx", png, 2, "picture", 3.0, 1.0)
    result = positioned(tmp_path / "r.pptx", png, 2, "picture", left, 1.0)
    assert compare_pptx_files(result, expected, examine_right_position=True) == score
    assert compare_pptx_files(result, expected) == 1.0  # a picture is exempt from examine_shape


@pytest.mark.parametrize("top, score", [(4.5, 1.0), (3.0, 0.0), (1.0, 0.0)])  # 10 cm is 3.94 in
def test_table_bottom_position_wants_slide_threes_table_moved_down(tmp_path, png, top, score):
    expected = positioned(tmp_path / "e.pptx", png, 3, "table", 1.0, 2.0)
    result = positioned(tmp_path / "r.pptx", png, 3, "table", 1.0, top)
    assert compare_pptx_files(result, expected, examine_table_bottom_position=True) == score
    # on another slide the table is held to the expected box instead
    moved = positioned(tmp_path / "m.pptx", png, 2, "table", 1.0, 4.5)
    assert compare_pptx_files(moved, positioned(tmp_path / "f.pptx", png, 2, "table", 1.0, 2.0),
                              examine_table_bottom_position=True) == 0.0


def test_title_bottom_position(make, tmp_path, png):
    expected = deck(tmp_path / "title.pptx", png, title="Product Comparison", title_top=2.0)
    moved = make(title="Product Comparison", title_top=4.5)
    assert compare_pptx_files(moved, expected, examine_shape=False, examine_title_bottom_position=True) == 1.0
    stayed = make(title="Product Comparison", title_top=2.0)
    assert compare_pptx_files(stayed, expected, examine_title_bottom_position=True) == 0.0


def test_shift_size_exempts_one_text_only(make, tmp_path, png):
    assert compare_pptx_files(make(box_left=2.0), deck(tmp_path / "g.pptx", png), examine_shape=False,
                              examine_shape_for_shift_size=True) == 0.0
    text = "Elaborate on what you want to discuss."
    expected = deck(tmp_path / "e.pptx", png, box_text=text)
    assert compare_pptx_files(make(box_text=text, box_left=2.0), expected, examine_shape=False,
                              examine_shape_for_shift_size=True) == 1.0


# Where OSWorld raises (and its run scores nothing), a correct comparison instead:


def test_theme_coloured_backgrounds_compare_by_theme_colour(make, tmp_path, png):
    expected = deck(tmp_path / "theme.pptx", png, background=None, theme_background=MSO_THEME_COLOR.ACCENT_1)
    assert compare_pptx_files(make(background=None, theme_background=MSO_THEME_COLOR.ACCENT_1), expected) == 1.0
    assert compare_pptx_files(make(background=None, theme_background=MSO_THEME_COLOR.ACCENT_2), expected) == 0.0
    assert compare_pptx_files(make(), expected) == 0.0  # an sRGB colour against a theme one


def test_notes_page_without_a_body_has_empty_notes(make, tmp_path, png):
    bodiless = make(notes_body=False)
    assert compare_pptx_files(bodiless, deck(tmp_path / "silent.pptx", png, notes="")) == 1.0
    assert compare_pptx_files(bodiless, deck(tmp_path / "spoken.pptx", png)) == 0.0
    assert compare_pptx_files(bodiless, deck(tmp_path / "spoken2.pptx", png), examine_note=False) == 1.0


def test_table_against_another_shape_differs(make, gold):
    assert compare_pptx_files(gold, make(table=False)) == 0.0


def test_unknown_position_equals_only_unknown(make, tmp_path, png):
    assert compare_pptx_files(make(box_xfrm=False), gold_deck := deck(tmp_path / "g.pptx", png)) == 0.0
    assert compare_pptx_files(make(box_xfrm=False), gold_deck, examine_shape=False) == 1.0
    assert compare_pptx_files(make(box_xfrm=False), deck(tmp_path / "n.pptx", png, box_xfrm=False)) == 1.0


def test_empty_text_element_does_not_skip_the_bullets_check(make, tmp_path, png):
    """OSWorld's parse of an empty <a:t/> fails and skips the slide's bullets check; here it is empty text."""
    expected = deck(tmp_path / "empty.pptx", png, empty_run=True)
    assert compare_pptx_files(make(empty_run=True), expected) == 1.0
    assert compare_pptx_files(make(empty_run=True, bullet="\u2022"), expected) == 0.0
