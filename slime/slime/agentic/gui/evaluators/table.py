"""OSWorld's spreadsheet metric ``compare_table`` (``desktop_env/evaluators/metrics/table.py``), with its semantics.

``compare_table(result, expected, rules=[...])`` opens the result workbook (a local .xlsx path, as the ``vm_file``
getter gives it) and the expected one (``cloud_file``, or None for rules about the result alone) and applies the
rules in order; the first rule that does not hold scores 0, all holding score 1. A result that is missing or does
not open scores 0. A rule names its sheet as OSWorld does: an int (the result's n-th sheet), ``RI<n>`` / ``RN<name>``
(the result's n-th / named sheet), ``EI<n>`` / ``EN<name>`` (the expected book's).

The rules (:data:`TABLE_RULES`) and what each compares:

    sheet_name        the two books' sheet names, in order
    sheet_data        two sheets' values as pandas reads them (the values LibreOffice saved for formulas), rounded to
                      `precision` decimals (4), dtypes included (``DataFrame.equals``)
    sheet_print       two sheets as printed: the CSV beside each book, ``<book stem>-<sheet name>.csv`` (the task's
                      postconfig writes it with ``libreoffice --convert-to csv``), each line stripped, trailing empty
                      lines dropped; `ignore_case`
    sheet_fuzzy       cell by cell over `rules[].range`: `exact_match`, `includes` (the second in the first),
                      `included_by`, `fuzzy_match` (rapidfuzz ratio >= `threshold`, 85), after `normalization`
                      pairs, `trim_leadings`, `trim_trailings`, `ignore_chars`, `ignore_case`
    check_cell        one cell of one sheet: its saved value or a style property against a rule
                      ({method: eq|ne|lt|le|gt|ge|approx:T|re[.FLAG...]|range.XY|spreadsheet_range|str_list_eq|
                      str_set_eq, ref})
    chart             the sheets' charts keyed by their data references; `chart_props` of each
    pivot_table       the sheets' pivot tables keyed by their source range; `pivot_props` of each
    freeze            the sheets' frozen panes
    zoom              one sheet's zoom (100 when unset) against {method, ref}
    data_validation   each of one sheet's validations matches one of `dv_props`, and there are at least as many
    row_props         the sheets' row dimensions' `props` (hidden, height, collapsed, ...)
    col_props         the same for columns
    filter            the sheets' auto-filters (range, filter columns, sort state)

Not implemented (a task using one is reported as not runnable, never scored wrongly): ``style`` (conditional
formatting evaluated through a formula engine) and ``sparkline``.

Where this differs from OSWorld, on purpose: a sheet's XML is found through the workbook's relationships (OSWorld
assumes ``sheet<sheetId>.xml``, true for files LibreOffice wrote, not for every writer); a chart's `anchor` is its
from-cell and to-cell (OSWorld's lists the to-row twice); an unknown rule or `sheet_fuzzy` type raises instead of
reusing the previous rule's outcome.
"""

from __future__ import annotations

import builtins
import functools
import logging
import operator
import os
import re
import zipfile
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_MAIN_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_CSV_ENCODINGS = ("utf-8", "utf-8-sig", "latin-1")  # latin-1 reads any bytes, so the list ends there


class TableRuleError(ValueError):
    """A rule this metric cannot apply (an unknown type, a malformed sheet index)."""


# ----------------------------------------------------------------------------------------------- value rules


def match_value_to_rule(value: Any, rule: dict) -> bool:
    """Does `value` satisfy ``{method, ref}``? OSWorld's rule language for cells, zoom and data validations."""
    method, ref = rule["method"], rule.get("ref")
    if method.startswith("re"):  # re, re.I, re.I.M ...: a search, flags by name
        flags = functools.reduce(operator.or_, (getattr(re, f) for f in method.split(".")[1:]), re.RegexFlag(0))
        return value is not None and re.search(ref, str(value), flags) is not None
    if method in ("eq", "ne", "lt", "le", "gt", "ge"):
        try:
            return bool(getattr(operator, method)(value, ref))
        except TypeError:  # None against a number: the cell does not hold what the rule compares
            return False
    if method.startswith("approx:"):
        try:
            return abs(float(value) - float(ref)) <= float(method.split(":", 1)[1])
        except (TypeError, ValueError):
            return False
    if method == "spreadsheet_range":  # ref = [must cover, may not exceed]
        from openpyxl.worksheet.cell_range import MultiCellRange

        inner, outer = MultiCellRange(ref[0]), MultiCellRange(ref[1])
        value = MultiCellRange(str(value)) if not isinstance(value, MultiCellRange) else value
        return all(r in value for r in inner) and all(r in outer for r in value)
    if method.startswith("range."):  # range.te [a, b]: a < x <= b (t: strict, e: or equal)
        left, right = method[6], method[7]
        return bool(getattr(operator, "l" + left)(ref[0], value) and getattr(operator, "l" + right)(value, ref[1]))
    if method in ("str_list_eq", "str_set_eq"):
        kind = getattr(builtins, method[4:-3])
        return kind(str(value).strip("\"'").split(",")) == kind(ref)
    raise TableRuleError(f"unknown value rule method {method!r}")


# --------------------------------------------------------------------------------------------- cell reading


def _xml(data: bytes):
    from lxml import etree

    return etree.fromstring(data)


def read_cell_value(xlsx_path: str | None, sheet_name: str, coordinate: str) -> Any:
    """A cell's value as the file saved it (a formula's last computed value, not its text): a float for numbers,
    the string for text, the error code for errors, a bool for booleans; None for an empty or missing cell, sheet or
    file. Read from the XML because openpyxl gives either formulas or values of the whole book, not both."""
    if not xlsx_path or not os.path.isfile(xlsx_path):
        return None
    try:
        with zipfile.ZipFile(xlsx_path) as z:
            sheet_xml = _sheet_part(z, sheet_name)
            if sheet_xml is None:
                return None
            cells = _xml(z.read(sheet_xml)).findall(f".//{{{_MAIN_NS}}}c[@r='{coordinate}']")
            if not cells:
                return None
            shared = _shared_strings(z)
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        logger.info("read_cell_value: %s: %s", xlsx_path, e)
        return None
    cell = cells[0]
    kind = cell.get("t", "n")
    v = cell.find(f"{{{_MAIN_NS}}}v")
    text = v.text if v is not None else None
    try:
        if kind == "n":
            return float(text) if text is not None else None
        if kind == "s":
            return shared[int(text)]
        if kind in ("str", "e"):
            return text
        if kind == "inlineStr":
            return "".join(t.text or "" for t in cell.iter(f"{{{_MAIN_NS}}}t"))
        if kind == "b":
            return text == "1"
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _shared_strings(z: zipfile.ZipFile) -> list[str]:
    try:
        root = _xml(z.read("xl/sharedStrings.xml"))
    except KeyError:
        return []
    # a string item's text is all its runs' texts; phonetic guides (rPh) are not part of the value
    out = []
    for si in root.findall(f"{{{_MAIN_NS}}}si"):
        parts = [t.text or "" for t in si.iter(f"{{{_MAIN_NS}}}t")
                 if t.getparent().tag != f"{{{_MAIN_NS}}}rPh"]
        out.append("".join(parts))
    return out


def _sheet_part(z: zipfile.ZipFile, sheet_name: str) -> str | None:
    """The zip member holding the named sheet, through the workbook's relationships."""
    book = _xml(z.read("xl/workbook.xml"))
    rel_id = None
    for sheet in book.iter(f"{{{_MAIN_NS}}}sheet"):
        if sheet.get("name") == sheet_name:
            rel_id = sheet.get(f"{{{_REL_NS}}}id")
            break
    if rel_id is None:
        return None
    for rel in _xml(z.read("xl/_rels/workbook.xml.rels")).iter(f"{{{_PKG_REL_NS}}}Relationship"):
        if rel.get("Id") == rel_id:
            target = rel.get("Target")
            return target.lstrip("/") if target.startswith("/") else "xl/" + target
    return None


def read_cell_style(name: str, cell) -> Any:
    """A style property of an openpyxl cell, as OSWorld names them; the font and number format only of cells that
    hold a value (None otherwise), as OSWorld reads them."""
    from openpyxl.cell.cell import MergedCell

    has_value = cell.value is not None
    if name == "merge":  # inside a merged range and not its first cell
        return isinstance(cell, MergedCell)
    if name == "number_format":
        return cell.number_format if has_value and cell.data_type == "n" else None
    fonts = {"font_name": "name", "font_family": "family", "font_bold": "b", "font_italic": "i",
             "font_underline": "u", "font_size": "sz"}
    if name in fonts:
        return getattr(cell.font, fonts[name]) if has_value else None
    if name == "font_color":
        return (cell.font.color.rgb if cell.font.color is not None else None) if has_value else None
    if name == "fill_type":
        return getattr(cell.fill, "tagname", None)
    if name in ("bgcolor", "fgcolor"):  # OSWorld reads a cell's background from the fill's foreground colour
        color = getattr(cell.fill, "fgColor", None)
        return getattr(color, "rgb", None)
    if name == "hyperlink":
        return (cell.hyperlink.target or "" if cell.hyperlink is not None else "") if has_value else None
    raise TableRuleError(f"unknown cell property {name!r}")


# ---------------------------------------------------------------------------------------------- the books


class _Books:
    """The two workbooks, each opened only the ways the rules ask for (openpyxl, pandas, the path itself)."""

    def __init__(self, result: str, expected: str | None):
        self.paths = {"R": result, "E": expected}
        self.xl, self.pd = {}, {}
        self.open("R", result)
        if expected is not None:
            self.open("E", expected)
        self.names = {k: list(book.sheet_names) for k, book in self.pd.items()}

    def open(self, which: str, path: str) -> None:
        import openpyxl
        import pandas as pd

        self.xl[which] = openpyxl.load_workbook(path)
        self.pd[which] = pd.ExcelFile(path)

    def sheet(self, idx: int | str) -> tuple[str, str]:
        """(which book, sheet name) for a rule's sheet index; a sheet that does not exist gets the name ""."""
        if isinstance(idx, int):
            which, pos = "R", idx
        elif isinstance(idx, str) and idx[:2] in ("RI", "EI"):
            which, pos = idx[0], idx[2:]
        elif isinstance(idx, str) and idx[:2] in ("RN", "EN"):
            return idx[0], idx[2:]
        else:
            raise TableRuleError(f"sheet index {idx!r}: an int, RI<n>, RN<name>, EI<n> or EN<name>")
        names = self.names.get(which)
        if names is None:
            raise TableRuleError(f"sheet index {idx!r} names the expected book, and the task gives none")
        try:
            return which, names[int(pos)]
        except (ValueError, IndexError):
            return which, ""

    def worksheet(self, idx):
        which, name = self.sheet(idx)
        book = self.xl.get(which)
        return book[name] if book is not None and name in book.sheetnames else None

    def frame(self, idx):
        import pandas as pd

        which, name = self.sheet(idx)
        if name not in self.names.get(which, []):
            return None
        return pd.read_excel(self.pd[which], name)

    def printed(self, idx) -> list[str] | None:
        which, name = self.sheet(idx)
        path = self.paths.get(which)
        if path is None:
            return None
        lines = _lines(f"{os.path.splitext(path)[0]}-{name}.csv")
        if lines is None:
            return None
        lines = [line.strip() for line in lines]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def value(self, idx, coordinate: str):
        which, name = self.sheet(idx)
        return read_cell_value(self.paths.get(which), name, coordinate)


# ------------------------------------------------------------------------------------------------- the rules


def _sheet_name(books: _Books, rule: dict) -> bool:
    return books.names["R"] == books.names.get("E")


def _sheet_data(books: _Books, rule: dict) -> bool:
    a, b = books.frame(rule["sheet_idx0"]), books.frame(rule["sheet_idx1"])
    if a is None or b is None:
        return False
    digits = rule.get("precision", 4)
    return bool(a.round(digits).equals(b.round(digits)))


def _sheet_print(books: _Books, rule: dict) -> bool:
    a, b = books.printed(rule["sheet_idx0"]), books.printed(rule["sheet_idx1"])
    if a is None or b is None:
        return False
    if rule.get("ignore_case", False):
        a, b = [x.lower() for x in a], [x.lower() for x in b]
    return a == b


_FUZZY_TYPES = {
    "includes": lambda a, b, rl: b in a,
    "included_by": lambda a, b, rl: a in b,
    "exact_match": lambda a, b, rl: a == b,
}


def _fuzzy_match(a: str, b: str, rl: dict) -> bool:
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) >= rl.get("threshold", 85.0)


_FUZZY_TYPES["fuzzy_match"] = _fuzzy_match


def _normalised(value: Any, rl: dict) -> str:
    text = str(value)  # OSWorld compares str() of the saved values, so an empty cell reads "None"
    for old, new in rl.get("normalization", []):
        text = text.replace(old, new)
    if "trim_leadings" in rl:
        text = text.lstrip(rl["trim_leadings"])
    if "trim_trailings" in rl:
        text = text.rstrip(rl["trim_trailings"])
    if "ignore_chars" in rl:
        text = "".join(ch for ch in text if ch not in set(rl["ignore_chars"]))
    return text.lower() if rl.get("ignore_case", False) else text


def _sheet_fuzzy(books: _Books, rule: dict) -> bool:
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.cell_range import CellRange

    for rl in rule["rules"]:
        compare = _FUZZY_TYPES.get(rl["type"])
        if compare is None:
            raise TableRuleError(f"sheet_fuzzy type {rl['type']!r}: one of {sorted(_FUZZY_TYPES)}")
        ranges = rl["range"] if isinstance(rl["range"], list) else str(rl["range"]).split()
        for rng in ranges:
            for row, col in CellRange(rng).cells:
                coordinate = f"{get_column_letter(col)}{row}"
                a = _normalised(books.value(rule["sheet_idx0"], coordinate), rl)
                b = _normalised(books.value(rule["sheet_idx1"], coordinate), rl)
                if not compare(a, b, rl):
                    return False
    return True


def _check_cell(books: _Books, rule: dict) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    cell = sheet[rule["coordinate"]]
    for prop, value_rule in rule["props"].items():
        if prop == "value":
            value = books.value(rule["sheet_idx"], rule["coordinate"])
        else:
            value = read_cell_style(prop, cell)
        if not match_value_to_rule(value, value_rule):
            return False
    return True


def _title_text(title) -> str | None:
    try:
        return title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _ref(data) -> str:
    for kind in ("numRef", "strRef"):
        ref = getattr(data, kind, None)
        if ref is not None and getattr(ref, "f", None) is not None:
            return ref.f
    return ""


def charts_of(sheet, props: list[str]) -> dict[str, dict]:
    """The sheet's charts, keyed by their series' value and category references, with the asked properties."""
    out: dict[str, dict] = {}
    for chart in getattr(sheet, "_charts", []) if sheet is not None else []:
        key = ";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in chart.series)
        info: dict[str, Any] = {}
        for prop in props:
            if prop == "title":
                info[prop] = _title_text(chart.title)
            elif prop == "legend":
                info[prop] = chart.legend.position if chart.legend is not None else None
            elif prop == "anchor":
                a = chart.anchor
                info[prop] = [a.editAs, a._from.col, a._from.row, a.to.col, a.to.row]
            elif prop in ("width", "height"):
                info[prop] = getattr(chart, prop)
            elif prop == "type":
                info[prop] = chart.tagname
            elif prop == "direction":
                info[prop] = getattr(chart, "barDir", None)
            elif prop in ("xtitle", "ytitle", "ztitle"):
                axis = getattr(chart, f"{prop[0]}_axis", None)
                info[prop] = _title_text(getattr(axis, "title", None))
            else:
                raise TableRuleError(f"unknown chart property {prop!r}")
        out[key] = info
    return out


def _chart(books: _Books, rule: dict) -> bool:
    props = list(rule.get("chart_props", []))
    return charts_of(books.worksheet(rule["sheet_idx0"]), props) == charts_of(books.worksheet(rule["sheet_idx1"]),
                                                                              props)


def pivots_of(sheet, props: list[str]) -> dict[str, dict]:
    """The sheet's pivot tables keyed by their source (type, range, sheet), with the asked properties. Field
    indices count from the first source column any field uses (OSWorld's "bias"), so a source range that starts
    further left with unused columns compares equal."""
    from openpyxl.utils.cell import coordinate_to_tuple

    out: dict[str, dict] = {}
    for pvt in getattr(sheet, "_pivots", []) if sheet is not None else []:
        selection = [[(item.h, item.x) for item in (f.items or []) if item.x is not None] for f in pvt.pivotFields]
        left = next((i for i, s in enumerate(selection) if s), len(selection))
        right = next((i for i, s in enumerate(reversed(selection)) if s), len(selection))
        selection = selection[left:len(selection) - right] if left < len(selection) else []
        source = pvt.cache.cacheSource
        first, last = source.worksheetSource.ref.split(":")
        r1, c1 = coordinate_to_tuple(first)
        r2, c2 = coordinate_to_tuple(last)
        key = f"{source.type};{(r1, c1 + left)}:{(r2, c2 - right)};{source.worksheetSource.sheet}"
        info: dict[str, Any] = {}
        plain = {"name": "name", "show_total": "visualTotals", "show_empty_row": "showEmptyRow",
                 "show_empty_col": "showEmptyCol", "show_headers": "showHeaders", "location": "location"}
        for prop, attr in plain.items():
            if prop in props:
                info[prop] = getattr(pvt, attr)
        if "filter" in props or "selection" in props:
            info["selection"] = selection if "ordered" in props else [set(s) for s in selection]
        if "filter" in props:
            info["filter_fields"] = {f.fld for f in pvt.pageFields}
        if "col_fields" in props:
            info["col_fields"] = [f.x - left for f in pvt.colFields]
        if "row_fields" in props:
            info["row_fields"] = [f.x - left for f in pvt.rowFields]
        if "data_fields" in props:
            named = "data_fields_name" in props
            info["data_fields"] = [f"{f.fld - left:d};{f.name if named else ''};{f.subtotal};{f.showDataAs}"
                                   for f in pvt.dataFields]
        out[key] = info
    return out


def _pivot_table(books: _Books, rule: dict) -> bool:
    props = list(rule.get("pivot_props", []))
    return pivots_of(books.worksheet(rule["sheet_idx0"]), props) == pivots_of(books.worksheet(rule["sheet_idx1"]),
                                                                              props)


def _freeze(books: _Books, rule: dict) -> bool:
    a, b = books.worksheet(rule["sheet_idx0"]), books.worksheet(rule["sheet_idx1"])
    if a is None or b is None:
        return False
    return a.freeze_panes == b.freeze_panes


def _zoom(books: _Books, rule: dict) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    return match_value_to_rule(sheet.sheet_view.zoomScale or 100.0, rule)


def _data_validation(books: _Books, rule: dict) -> bool:
    sheet = books.worksheet(rule["sheet_idx"])
    if sheet is None:
        return False
    validations = sheet.data_validations.dataValidation
    wanted = rule["dv_props"]
    if len(validations) < len(wanted):
        return False
    return all(any(all(match_value_to_rule(getattr(dv, attr), r) for attr, r in props.items()) for props in wanted)
               for dv in validations)


def dimensions_of(sheet, obj: str, props: list[str]) -> dict:
    if sheet is None:
        return {}
    held = getattr(sheet, f"{obj}_dimensions")
    return {key: {p: getattr(dim, p) for p in props} for key, dim in held.items()}


def _row_props(books: _Books, rule: dict) -> bool:
    props = list(rule.get("props", []))
    return (dimensions_of(books.worksheet(rule["sheet_idx0"]), "row", props)
            == dimensions_of(books.worksheet(rule["sheet_idx1"]), "row", props))


def _col_props(books: _Books, rule: dict) -> bool:
    props = list(rule.get("props", []))
    return (dimensions_of(books.worksheet(rule["sheet_idx0"]), "column", props)
            == dimensions_of(books.worksheet(rule["sheet_idx1"]), "column", props))


def filters_of(sheet) -> dict:
    """The sheet's auto-filter: its range, each filtered column (by id) and the sort state."""
    if sheet is None:
        return {}
    flt = sheet.auto_filter
    columns = []
    for col in flt.filterColumn:
        entry: dict[str, Any] = {"col_id": col.colId, "hidden_button": col.hiddenButton,
                                 "show_button": col.showButton}
        if col.filters is not None:
            entry["filters_blank"] = col.filters.blank
            entry["filters"] = set(col.filters.filter)
        if col.customFilters is not None:
            entry["custom_filters_op"] = col.customFilters._and
            entry["custom_filters"] = {(c.operator, c.val) for c in col.customFilters.customFilter}
        columns.append(entry)
    out: dict[str, Any] = {"ref": flt.ref, "filter_column": sorted(columns, key=lambda d: d["col_id"])}
    sort = flt.sortState
    if sort is not None:
        out["sort_state"] = {
            "sort": sort.columnSort, "case": sort.caseSensitive, "method": sort.sortMethod, "ref": sort.ref,
            "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref, "custom_list": c.customList,
                           "dxf_id": c.dxfId, "icon": c.iconSet, "iconid": c.iconId} for c in sort.sortCondition]}
    return out


def _filter(books: _Books, rule: dict) -> bool:
    return filters_of(books.worksheet(rule["sheet_idx0"])) == filters_of(books.worksheet(rule["sheet_idx1"]))


TABLE_RULES: dict[str, Callable[[_Books, dict], bool]] = {
    "sheet_name": _sheet_name, "sheet_data": _sheet_data, "sheet_print": _sheet_print, "sheet_fuzzy": _sheet_fuzzy,
    "check_cell": _check_cell, "chart": _chart, "pivot_table": _pivot_table, "freeze": _freeze, "zoom": _zoom,
    "data_validation": _data_validation, "row_props": _row_props, "col_props": _col_props, "filter": _filter}


def unsupported_table_rules(options: dict | None) -> list[str]:
    """The rule types of a compare_table evaluator this module does not implement (checked when a task loads)."""
    rules = (options or {}).get("rules", [])
    return sorted({str(r.get("type")) for r in rules if isinstance(r, dict) and r.get("type") not in TABLE_RULES})


def _lines(path: str) -> list[str] | None:
    for encoding in _CSV_ENCODINGS:
        try:
            with open(path, encoding=encoding) as f:
                return f.read().splitlines()
        except UnicodeDecodeError:
            continue
        except OSError:
            return None
    return None


def compare_csv(result: str | None, expected: str | list[str], **options) -> float:
    """OSWorld's compare_csv: the result file's lines equal one expected file's (any of a list); `strict` (True)
    keeps blanks at the ends of lines, `ignore_case` (False) lower-cases."""
    ours = _lines(result) if result else None
    if ours is None:
        return 0.0

    def norm(lines: list[str]) -> list[str]:
        if not options.get("strict", True):
            lines = [line.strip() for line in lines]
        return [line.lower() for line in lines] if options.get("ignore_case", False) else lines

    for candidate in [expected] if isinstance(expected, str) else list(expected):
        theirs = _lines(candidate)
        if theirs is not None and norm(ours) == norm(theirs):
            return 1.0
    return 0.0


def compare_table(result: str | None, expected: str | None = None, **options) -> float:
    """1.0 when every rule holds (in order; the first that fails decides), else 0.0."""
    missing = unsupported_table_rules(options)
    if missing:
        raise TableRuleError(f"compare_table rules not implemented: {', '.join(missing)}")
    if not result or not os.path.isfile(result):
        return 0.0
    try:
        books = _Books(result, None)
    except Exception as e:  # noqa: BLE001 - a result that is not a workbook (a broken save) scores 0, as OSWorld
        logger.info("compare_table: cannot open the result %s: %s", result, e)
        return 0.0
    if expected:
        books.paths["E"] = expected
        books.open("E", expected)  # a broken expected file is the task's fault: it raises, as OSWorld
        books.names["E"] = list(books.pd["E"].sheet_names)
    for rule in options.get("rules", []):
        if not TABLE_RULES[rule["type"]](books, rule):
            logger.info("compare_table: rule %s does not hold", rule["type"])
            return 0.0
    return 1.0


__all__ = ["TABLE_RULES", "TableRuleError", "charts_of", "compare_csv", "compare_table", "dimensions_of",
           "filters_of", "match_value_to_rule", "pivots_of", "read_cell_style", "read_cell_value",
           "unsupported_table_rules"]
