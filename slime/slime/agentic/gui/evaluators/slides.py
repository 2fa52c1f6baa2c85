"""OSWorld's presentation metric ``compare_pptx_files`` (``desktop_env/evaluators/metrics/slides.py``), with its
semantics.

``compare_pptx_files(result, expected, **options)`` opens both decks with python-pptx and scores 1 when no enabled
check finds a difference, 0 at the first one that does. A deck that is missing or does not open scores 0. Slides are
paired in order, and shapes within a slide in order; on each slide, as OSWorld does:

    background          the slide's solid fill colour, else the master's when the slide has none (`background_color`)
    notes               the speaker notes' text, stripped (`note`)
    shape count         always
    geometry            left / top / width / height within a relative `approximately_tolerance` (`shape`; shapes
                        whose texts are both empty, pictures and tables included, are exempt), and the special
                        geometry options below
    tables              rows and columns, paragraphs per cell, runs per paragraph (`run_count`), each run's colour
                        (`color_rgb`) and, whatever the options say, its bold, italic and underline; not the cells' text
    text shapes         the text (`text`), paragraph count (always), and per paragraph its alignment (`alignment`),
                        text (`text`), level (`indent`), run count (`run_count`), then per run the font's name, size,
                        bold, italic, sRGB colour, underline and strike-through (each its `font_*` / `color_rgb` /
                        `strike_through` option); after the first pair of runs compared, the bullets (`bullets`)
    all text shapes     those inside groups too: their count (always), and with `alignment` their text (`text`),
                        paragraph count and alignments

(An option ``examine_X`` is written above as `X`.) OSWorld's leniencies are kept: a run's bold or italic left unset
equals one set off; underline unset equals off, and differs from a single underline only; colours are compared only
when both runs name an sRGB colour; paragraph levels 0 and 1 are equal; a paragraph without text is compared by its
non-empty runs only. The bullets check compares every paragraph with text on the slide (tables and groups included)
by text, bullet character and, when either has a character, level.

The special geometry options are OSWorld's, some tied to one task's slide, shape or text; they compare the first
deck (the result) with the second (the expected one): ``examine_title_bottom_position``,
``examine_table_bottom_position``, ``examine_right_position``, ``examine_top_position``,
``examine_shape_for_shift_size``, ``examine_image_size`` (pictures by size, other shapes by position and size) and
``examine_modify_height`` (shapes without text, and freeform pairs, by height; other shapes by position and size).

Where this differs from OSWorld, on purpose, each where OSWorld raises instead of scoring: a deck that does not
open scores 0; a position python-pptx reads as None equals only None; a table paired with a shape that is not one
differs; a slide without notes (or whose notes have no body) has empty notes; a solid background in a theme or other
non-sRGB colour is compared by its kind, theme colour and brightness; a shape python-pptx cannot classify has no
kind; a check turned off is not computed (OSWorld reads notes, backgrounds and boxes first and can raise on them even
then). And one where OSWorld's error is swallowed: an empty ``<a:t/>`` counts as empty text in the bullets check
(OSWorld's parse fails there and skips that check for the whole slide). Unknown options raise (a task asking for a
check not made here must not be scored as if it were); ``enable_debug`` is accepted and only sets the level at which
a difference is logged.
"""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

PPTX_OPTIONS: dict[str, Any] = {
    "examine_number_of_slides": True,
    "examine_shape": True,
    "examine_text": True,
    "examine_indent": True,
    "examine_font_name": True,
    "examine_font_size": True,
    "examine_font_bold": True,
    "examine_font_italic": True,
    "examine_color_rgb": True,
    "examine_font_underline": True,
    "examine_strike_through": True,
    "examine_alignment": True,
    "examine_title_bottom_position": False,
    "examine_table_bottom_position": False,
    "examine_run_count": True,
    "examine_right_position": False,
    "examine_top_position": False,
    "examine_shape_for_shift_size": False,
    "examine_image_size": False,
    "examine_modify_height": False,
    "examine_bullets": True,
    "examine_background_color": True,
    "examine_note": True,
    "approximately_tolerance": 0.005,
    "enable_debug": True,
}

# python-pptx's MSO_SHAPE_TYPE and MSO_FILL values, as ints so that this module imports without python-pptx
_FREEFORM, _PICTURE, _TABLE = 5, 13, 19
_FILL_SOLID, _FILL_BACKGROUND = 1, 5
_ALIGN_LEFT = 1  # PP_ALIGN.LEFT: an unset alignment reads as left

# The special geometry options' constants, in EMU, each fitted by OSWorld to one task's expected deck
_TITLE_TEXT, _TITLE_MIN_TOP = "Product Comparison", 3600000  # the title moved down, at least 10 cm from the top
_TABLE_SLIDE, _TABLE_MIN_TOP = 3, 3600000  # the table on slide 3 moved down, likewise
_RIGHT_SLIDE, _RIGHT_MIN_LEFT = 2, 4320000  # text-less shapes on slide 2 moved right, at least 12 cm from the left
_TOP_SLIDE, _TOP_MAX_TOP = 2, 1980000  # pictures on slide 2 moved up, at most 5.5 cm from the top
_SHIFT_EXEMPT_TEXT = "Elaborate on what you want to discuss."  # the one text box allowed to move or resize


class _Differs(Exception):
    """A check found the decks different; the message says where and what (logged, never raised to callers)."""


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise _Differs(what)


# ------------------------------------------------------------------------------------------------------ geometry


def _close(a, b, tolerance: float) -> bool:
    """Equal within a relative tolerance, as OSWorld's is_approximately_equal. A length python-pptx cannot read is
    None: it equals only None (OSWorld's arithmetic would raise on it)."""
    if a == b:
        return True
    if a is None or b is None or a == 0 or b == 0:
        return False  # a zero is only close to zero: no relative measure exists
    return abs(a - b) / max(abs(a), abs(b)) <= tolerance


def _close_in(a, b, tolerance: float, fields=("left", "top", "width", "height")) -> bool:
    return all(_close(getattr(a, f), getattr(b, f), tolerance) for f in fields)


def _kind(shape):
    """The shape's MSO_SHAPE_TYPE; None where python-pptx does not recognise it (an sp without geometry raises)."""
    try:
        return shape.shape_type
    except NotImplementedError:
        return None


def _has_text(shape) -> bool:
    """python-pptx gives text to autoshapes, text boxes and placeholders; pictures, tables, groups and connectors
    have none."""
    return hasattr(shape, "text") and hasattr(shape, "text_frame")


def _blank(shape) -> bool:
    """No text to show: OSWorld exempts two such shapes from `examine_shape`, as their boxes vary between saves."""
    return not (getattr(shape, "text", None) or "").strip()


def _beyond(a, b, floor, attr: str) -> bool:
    """`a`'s coordinate is greater than `b`'s and at least `floor` (an unknown coordinate never is)."""
    x, y = getattr(a, attr), getattr(b, attr)
    return x is not None and y is not None and x > y and x >= floor


def _check_special_geometry(n: int, a, b, opt: dict) -> None:
    """OSWorld's task-specific geometry options, each applied to every pair of shapes when on."""
    tol = opt["approximately_tolerance"]
    if opt["examine_title_bottom_position"]:
        if _has_text(a) and _has_text(b) and a.text == b.text:
            if a.text == _TITLE_TEXT:
                _require(_beyond(a, b, _TITLE_MIN_TOP, "top"), f"slide {n}: the title did not move down")
        else:
            _require(_close_in(a, b, tol), f"slide {n}: a shape moved or resized ({a.name!r})")
    if opt["examine_table_bottom_position"]:
        if n == _TABLE_SLIDE and _kind(a) == _TABLE and _kind(b) == _TABLE:
            _require(_beyond(a, b, _TABLE_MIN_TOP, "top"), f"slide {n}: the table did not move down")
        else:
            _require(_close_in(a, b, tol), f"slide {n}: a shape moved or resized ({a.name!r})")
    if opt["examine_right_position"] and n == _RIGHT_SLIDE and not _has_text(a) and not _has_text(b):
        _require(_beyond(a, b, _RIGHT_MIN_LEFT, "left"), f"slide {n}: {a.name!r} did not move right")
    if opt["examine_top_position"] and n == _TOP_SLIDE and _kind(a) == _PICTURE and _kind(b) == _PICTURE:
        moved_up = a.top is not None and b.top is not None and a.top < b.top and a.top <= _TOP_MAX_TOP
        _require(moved_up, f"slide {n}: picture {a.name!r} did not move up")
    if opt["examine_shape_for_shift_size"] and not _close_in(a, b, tol):
        exempt = _has_text(a) and _has_text(b) and a.text == b.text == _SHIFT_EXEMPT_TEXT
        _require(exempt, f"slide {n}: {a.name!r} moved or resized")


def _check_geometry(n: int, a, b, opt: dict) -> None:
    """Position and size, in OSWorld's order: the special options, `examine_shape`, image size, modified height."""
    tol = opt["approximately_tolerance"]
    _check_special_geometry(n, a, b, opt)
    if opt["examine_shape"] and not (_blank(a) and _blank(b)):
        _require(_close_in(a, b, tol), f"slide {n}: {a.name!r} differs in position or size")
    if opt["examine_image_size"]:
        if _kind(a) == _PICTURE and _kind(b) == _PICTURE:
            _require(_close_in(a, b, tol, ("width", "height")), f"slide {n}: picture {a.name!r} differs in size")
        else:
            _require(_close_in(a, b, tol), f"slide {n}: {a.name!r} differs in position or size")
    if opt["examine_modify_height"]:
        # the shape whose height a task changes is a picture, a line or a freeform: only its height is compared
        if (not _has_text(a) and not _has_text(b)) or (_kind(a) == _FREEFORM and _kind(b) == _FREEFORM):
            _require(_close(a.height, b.height, tol), f"slide {n}: {a.name!r} differs in height")
        else:
            _require(_close_in(a, b, tol), f"slide {n}: {a.name!r} differs in position or size")


# ---------------------------------------------------------------------------------------------------------- runs


def _runs(p1, p2) -> tuple[list, list]:
    """Two paragraphs' runs; for two paragraphs without text only the runs with text, so that an empty run left by
    an editor does not count."""
    if not (p1.text or "").strip() and not (p2.text or "").strip():
        return [r for r in p1.runs if (r.text or "").strip()], [r for r in p2.runs if (r.text or "").strip()]
    return list(p1.runs), list(p2.runs)


def _srgb(run):
    """The run's colour when it names an sRGB one, else None (theme, preset and inherited colours are not read)."""
    try:
        return run.font.color.rgb
    except AttributeError:  # python-pptx has no rgb for a non-sRGB colour
        return None


def _flag_differs(x, y) -> bool:
    """Bold or italic: unset (None) and off (False) look alike, so only on against not-on differs."""
    return bool(x) != bool(y)


def _underline_differs(x, y) -> bool:
    """OSWorld's rule: two set values differ when unequal; unset differs from a single underline (True) only."""
    if x == y:
        return False
    if x is not None and y is not None:
        return True
    return True in (x, y)


def _strike(run) -> str:
    return run.font._rPr.get("strike", "noStrike")  # python-pptx reads no strike-through: the attribute itself


def _check_run_pair(where: str, r1, r2, opt: dict) -> None:
    f1, f2 = r1.font, r2.font
    if opt["examine_font_name"]:
        _require(f1.name == f2.name, f"{where}: font {f1.name!r} against {f2.name!r}")
    if opt["examine_font_size"]:
        _require(f1.size == f2.size, f"{where}: font size {f1.size} against {f2.size}")
    if opt["examine_font_bold"]:
        _require(not _flag_differs(f1.bold, f2.bold), f"{where}: bold {f1.bold} against {f2.bold}")
    if opt["examine_font_italic"]:
        _require(not _flag_differs(f1.italic, f2.italic), f"{where}: italic {f1.italic} against {f2.italic}")
    c1, c2 = _srgb(r1), _srgb(r2)
    if opt["examine_color_rgb"] and c1 is not None and c2 is not None:
        _require(c1 == c2, f"{where}: colour {c1} against {c2}")
    if opt["examine_font_underline"]:
        _require(not _underline_differs(f1.underline, f2.underline), f"{where}: underline differs")
    if opt["examine_strike_through"]:
        _require(_strike(r1) == _strike(r2), f"{where}: strike-through {_strike(r1)} against {_strike(r2)}")


def _check_table_run_pair(where: str, r1, r2, opt: dict) -> None:
    """A table cell's run: OSWorld compares its colour under `examine_color_rgb` and its bold, italic and underline
    whatever the options say."""
    f1, f2 = r1.font, r2.font
    c1, c2 = _srgb(r1), _srgb(r2)
    if opt["examine_color_rgb"] and c1 is not None and c2 is not None:
        _require(c1 == c2, f"{where}: colour {c1} against {c2}")
    _require(not _flag_differs(f1.bold, f2.bold), f"{where}: bold {f1.bold} against {f2.bold}")
    _require(not _flag_differs(f1.italic, f2.italic), f"{where}: italic {f1.italic} against {f2.italic}")
    _require(not _underline_differs(f1.underline, f2.underline), f"{where}: underline differs")


# ------------------------------------------------------------------------------------------------ text and tables


def _alignment(paragraph):
    return _ALIGN_LEFT if paragraph.alignment is None else paragraph.alignment  # unset is drawn left-aligned


def _same_level(l1, l2) -> bool:
    """Levels 0 and 1 are taken as the same indent (editors write one or the other for a continuation line)."""
    l1, l2 = l1 or 0, l2 or 0
    return l1 == l2 or (l1 in (0, 1) and l2 in (0, 1))


def _check_table(where: str, a, b, opt: dict) -> None:
    """Cell by cell: paragraph and run counts and the runs' formatting. The cells' text is not compared here (OSWorld
    does not); the bullets check, when a slide reaches it, covers it."""
    _require(getattr(b, "has_table", False), f"{where}: a table against a shape that is not one")
    t1, t2 = a.table, b.table
    shape1, shape2 = (len(t1.rows), len(t1.columns)), (len(t2.rows), len(t2.columns))
    _require(shape1 == shape2, f"{where}: a table of {shape1} cells against {shape2}")
    for row in range(shape1[0]):
        for col in range(shape1[1]):
            paras1, paras2 = t1.cell(row, col).text_frame.paragraphs, t2.cell(row, col).text_frame.paragraphs
            cell = f"{where}, cell ({row}, {col})"
            _require(len(paras1) == len(paras2), f"{cell}: {len(paras1)} paragraphs against {len(paras2)}")
            for p1, p2 in zip(paras1, paras2):
                runs1, runs2 = _runs(p1, p2)
                if opt["examine_run_count"]:
                    _require(len(runs1) == len(runs2), f"{cell}: {len(runs1)} runs against {len(runs2)}")
                for r1, r2 in zip(runs1, runs2):
                    _check_table_run_pair(cell, r1, r2, opt)


def _check_text_shape(where: str, a, b, opt: dict) -> bool:
    """A pair of shapes with text, paragraph by paragraph and run by run. Returns whether a pair of runs was compared
    (OSWorld checks the slide's bullets from within that loop)."""
    if opt["examine_text"]:
        _require(a.text.strip() == b.text.strip(), f"{where}: text {a.text.strip()!r} against {b.text.strip()!r}")
    paras1, paras2 = a.text_frame.paragraphs, b.text_frame.paragraphs
    _require(len(paras1) == len(paras2), f"{where}: {len(paras1)} paragraphs against {len(paras2)}")
    compared = False
    for i, (p1, p2) in enumerate(zip(paras1, paras2), 1):
        para = f"{where}, paragraph {i}"
        if opt["examine_alignment"]:
            _require(_alignment(p1) == _alignment(p2), f"{para}: alignment {p1.alignment} against {p2.alignment}")
        if opt["examine_text"]:
            _require(p1.text == p2.text, f"{para}: text {p1.text!r} against {p2.text!r}")
        if opt["examine_indent"]:
            _require(_same_level(p1.level, p2.level), f"{para}: level {p1.level} against {p2.level}")
        runs1, runs2 = _runs(p1, p2)
        if opt["examine_run_count"]:
            _require(len(runs1) == len(runs2), f"{para}: {len(runs1)} runs against {len(runs2)}")
        for r1, r2 in zip(runs1, runs2):
            _check_run_pair(para, r1, r2, opt)
            compared = True
    return compared


def _text_shapes(shapes) -> list:
    """The shapes with text, those inside groups included, each before its group's members."""
    found = []
    for shape in shapes:
        if _has_text(shape):
            found.append(shape)
        if hasattr(shape, "shapes"):
            found += _text_shapes(shape.shapes)
    return found


def _check_all_text_shapes(n: int, slide1, slide2, opt: dict) -> None:
    """OSWorld's second pass over every text shape, grouped ones included: it is what compares text in groups."""
    shapes1, shapes2 = _text_shapes(slide1.shapes), _text_shapes(slide2.shapes)
    _require(len(shapes1) == len(shapes2), f"slide {n}: {len(shapes1)} text shapes against {len(shapes2)}")
    if not opt["examine_alignment"]:
        return
    for a, b in zip(shapes1, shapes2):
        where = f"slide {n}, text shape {a.name!r}"
        if opt["examine_text"]:
            _require(a.text.strip() == b.text.strip(), f"{where}: text {a.text.strip()!r} against {b.text.strip()!r}")
        paras1, paras2 = a.text_frame.paragraphs, b.text_frame.paragraphs
        _require(len(paras1) == len(paras2), f"{where}: {len(paras1)} paragraphs against {len(paras2)}")
        for p1, p2 in zip(paras1, paras2):
            _require(_alignment(p1) == _alignment(p2), f"{where}: alignment {p1.alignment} against {p2.alignment}")


# --------------------------------------------------------------------------------------------------- slide level


def _fill_colour(fill):
    """A solid fill's sRGB colour; for another kind of colour (a theme one), what identifies it, so that two alike
    compare equal (OSWorld's .rgb raises on those)."""
    colour = fill.fore_color
    try:
        return colour.rgb
    except AttributeError:
        return (str(colour.type), colour.theme_color, colour.brightness)


def _background(slide):
    """The slide's solid background colour, else (no fill of its own) its master's; None for other fills. The
    layout's background is not consulted, as OSWorld does not."""
    fill = slide.background.fill
    if fill.type == _FILL_SOLID:
        return _fill_colour(fill)
    if fill.type == _FILL_BACKGROUND:
        master_fill = slide.slide_layout.slide_master.background.fill
        return _fill_colour(master_fill) if master_fill.type == _FILL_SOLID else None
    return None


def _notes(slide) -> str:
    """The speaker notes' text; empty when the slide has no notes page or the page has no body (OSWorld raises)."""
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return frame.text if frame is not None else ""


def _bullets(slide) -> list[tuple]:
    """(level, bullet character, text) of each paragraph with text anywhere on the slide, read from its XML."""
    from pptx.oxml.ns import qn

    found = []
    for p in slide.element.iter(qn("a:p")):
        ppr = p.find(qn("a:pPr"))
        char = level = None
        if ppr is not None:
            level = ppr.get("lvl")
            bu_char = ppr.find(qn("a:buChar"))
            char = bu_char.get("char", "") if bu_char is not None else None
        text = "".join(t.text or "" for t in p.iter(qn("a:t")))
        if text.strip():
            found.append((level or "0", char, text))
    return found


def _check_bullets(n: int, slide1, slide2) -> None:
    b1, b2 = _bullets(slide1), _bullets(slide2)
    _require(len(b1) == len(b2), f"slide {n}: {len(b1)} paragraphs with text against {len(b2)}")
    for (lvl1, char1, text1), (lvl2, char2, text2) in zip(b1, b2):
        _require(text1 == text2, f"slide {n}: paragraph {text1!r} against {text2!r}")
        _require(char1 == char2, f"slide {n}: bullet {char1!r} against {char2!r} on {text1!r}")
        if char1 is not None or char2 is not None:  # the level of a paragraph without a bullet is not seen
            _require(lvl1 == lvl2, f"slide {n}: bullet level {lvl1} against {lvl2} on {text1!r}")


def _check_slide(n: int, slide1, slide2, opt: dict) -> None:
    if opt["examine_background_color"]:
        bg1, bg2 = _background(slide1), _background(slide2)
        _require(bg1 == bg2, f"slide {n}: background {bg1} against {bg2}")
    if opt["examine_note"]:
        _require(_notes(slide1).strip() == _notes(slide2).strip(), f"slide {n}: the notes differ")
    shapes1, shapes2 = list(slide1.shapes), list(slide2.shapes)
    _require(len(shapes1) == len(shapes2), f"slide {n}: {len(shapes1)} shapes against {len(shapes2)}")
    runs_compared = False
    for a, b in zip(shapes1, shapes2):
        where = f"slide {n}, shape {a.name!r}"
        _check_geometry(n, a, b, opt)
        if _kind(a) == _TABLE:
            _check_table(where, a, b, opt)
        if _has_text(a) and _has_text(b):
            runs_compared = _check_text_shape(where, a, b, opt) or runs_compared
    # OSWorld reads the bullets of the whole slide once a pair of runs is compared; doing it once, here, scores alike
    if opt["examine_bullets"] and runs_compared:
        _check_bullets(n, slide1, slide2)
    _check_all_text_shapes(n, slide1, slide2, opt)


def _options(options: dict) -> dict:
    unknown = sorted(set(options) - set(PPTX_OPTIONS))
    if unknown:
        raise ValueError(f"compare_pptx_files: options not implemented: {', '.join(unknown)}")
    return {**PPTX_OPTIONS, **options}


def _open(path):
    from pptx import Presentation

    return Presentation(os.fspath(path))


def compare_pptx_files(file1_path: str | None, file2_path: str | None, **options) -> float:
    """1.0 when the first deck (the result) matches the second (the expected one) under `options`, else 0.0."""
    opt = _options(options)
    if not file1_path or not file2_path:
        return 0.0
    try:
        deck1, deck2 = _open(file1_path), _open(file2_path)
    except Exception as e:  # noqa: BLE001 - a deck that does not open (a broken or foreign save) scores 0
        logger.info("compare_pptx_files: cannot read %s or %s: %s", file1_path, file2_path, e)
        return 0.0
    slides1, slides2 = list(deck1.slides), list(deck2.slides)
    try:
        if opt["examine_number_of_slides"]:
            _require(len(slides1) == len(slides2), f"{len(slides1)} slides against {len(slides2)}")
        for n, (slide1, slide2) in enumerate(zip(slides1, slides2), 1):
            _check_slide(n, slide1, slide2, opt)
    except _Differs as e:
        log = logger.info if opt["enable_debug"] else logger.debug
        log("compare_pptx_files: %s differs from %s: %s", file1_path, file2_path, e)
        return 0.0
    return 1.0


__all__ = ["PPTX_OPTIONS", "compare_pptx_files"]
