"""OSWorld's compare_table on workbooks written here with openpyxl: each rule on a state that meets it and one that
does not, the sheet index forms, cell values read from the file's XML, and the value-rule language."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

openpyxl = pytest.importorskip("openpyxl")
pytest.importorskip("pandas")

from openpyxl.chart import BarChart, LineChart, Reference  # noqa: E402
from openpyxl.styles import Font, PatternFill  # noqa: E402
from openpyxl.worksheet.datavalidation import DataValidation  # noqa: E402

from slime.agentic.gui.evaluators import METRICS  # noqa: E402
from slime.agentic.gui.evaluators.table import (  # noqa: E402
    TableRuleError, compare_csv, compare_table, match_value_to_rule, pivots_of, read_cell_value,
    unsupported_table_rules)

ROWS = [["Name", "Sales", "Share"], ["Ann", 120, 0.12345], ["Bob", 80, 0.5], ["Cid", 95, 0.25]]


def book(path: Path, rows=ROWS, *, sheets=("Sheet1",), edit=None) -> str:
    wb = openpyxl.Workbook()
    wb.active.title = sheets[0]
    for name in sheets[1:]:
        wb.create_sheet(name)
    for row in rows:
        wb[sheets[0]].append(row)
    if edit:
        edit(wb)
    wb.save(path)
    return str(path)


def rules(*rs) -> dict:
    return {"rules": list(rs)}


def data_rule(**kw) -> dict:
    return {"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0", **kw}


def test_compare_table_is_registered_by_osworld_name():
    assert METRICS["compare_table"] is compare_table
    assert METRICS["compare_csv"] is compare_csv


def test_sheet_data_compares_values_rounded_to_four_decimals(tmp_path):
    gold = book(tmp_path / "gold.xlsx")
    assert compare_table(book(tmp_path / "same.xlsx"), gold, **rules(data_rule())) == 1.0
    changed = [row[:] for row in ROWS]
    changed[2][1] = 81
    assert compare_table(book(tmp_path / "changed.xlsx", changed), gold, **rules(data_rule())) == 0.0
    close = [row[:] for row in ROWS]
    close[1][2] = 0.123449  # rounds to the gold's 0.1234 (0.12345 rounds half to even)
    assert compare_table(book(tmp_path / "close.xlsx", close), gold, **rules(data_rule())) == 1.0
    assert compare_table(book(tmp_path / "close2.xlsx", close), gold, **rules(data_rule(precision=6))) == 0.0


def test_sheet_data_reads_values_as_pandas_does(tmp_path):
    gold = book(tmp_path / "gold.xlsx")
    as_text = [row[:] for row in ROWS]
    as_text[1][1] = "120"  # a number typed as text reads as the number (pandas parses the column), as in OSWorld
    assert compare_table(book(tmp_path / "text.xlsx", as_text), gold, **rules(data_rule())) == 1.0
    longer = [row[:] for row in ROWS] + [["Dan", 1, 0.1]]
    assert compare_table(book(tmp_path / "longer.xlsx", longer), gold, **rules(data_rule())) == 0.0
    wider = [row[:] + ["x"] for row in ROWS]
    assert compare_table(book(tmp_path / "wider.xlsx", wider), gold, **rules(data_rule())) == 0.0


def test_sheet_index_forms(tmp_path):
    gold = book(tmp_path / "gold.xlsx", sheets=("Data", "Other"))
    mine = book(tmp_path / "mine.xlsx", sheets=("Data", "Other"))
    for idx0, idx1 in ((0, "EI0"), ("RI0", "ENData"), ("RNData", "EI0"), ("RNData", "RNData")):
        assert compare_table(mine, gold, **rules(data_rule(sheet_idx0=idx0, sheet_idx1=idx1))) == 1.0
    # the second sheet is empty in both, the first is not: comparing across them fails
    assert compare_table(mine, gold, **rules(data_rule(sheet_idx0="RI1", sheet_idx1="EI0"))) == 0.0
    # a sheet that does not exist fails the rule; a malformed index is the task's error
    assert compare_table(mine, gold, **rules(data_rule(sheet_idx0="RNMissing"))) == 0.0
    with pytest.raises(TableRuleError):
        compare_table(mine, gold, **rules(data_rule(sheet_idx0="XX0")))


def test_sheet_name(tmp_path):
    gold = book(tmp_path / "gold.xlsx", sheets=("Data", "Notes"))
    rule = {"type": "sheet_name"}
    assert compare_table(book(tmp_path / "a.xlsx", sheets=("Data", "Notes")), gold, **rules(rule)) == 1.0
    assert compare_table(book(tmp_path / "b.xlsx", sheets=("Data", "Note")), gold, **rules(rule)) == 0.0


def test_sheet_print_reads_the_csv_beside_each_book(tmp_path):
    gold = book(tmp_path / "gold.xlsx")
    mine = book(tmp_path / "mine.xlsx")
    (tmp_path / "gold-Sheet1.csv").write_text("Name,Sales\nAnn,\"1,200\"\n\n\n")
    rule = {"type": "sheet_print", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    (tmp_path / "mine-Sheet1.csv").write_text("Name,Sales  \nAnn,\"1,200\"\n")
    assert compare_table(mine, gold, **rules(rule)) == 1.0  # trailing blanks and empty lines do not count
    (tmp_path / "mine-Sheet1.csv").write_text("Name,Sales\nAnn,1200\n")
    assert compare_table(mine, gold, **rules(rule)) == 0.0  # printed differently: not the format asked for
    (tmp_path / "mine-Sheet1.csv").write_text("NAME,SALES\nANN,\"1,200\"\n")
    assert compare_table(mine, gold, **rules(rule)) == 0.0
    assert compare_table(mine, gold, **rules({**rule, "ignore_case": True})) == 1.0
    (tmp_path / "mine-Sheet1.csv").unlink()
    assert compare_table(mine, gold, **rules(rule)) == 0.0  # the postconfig did not write it


def test_sheet_fuzzy_rules(tmp_path):
    gold = book(tmp_path / "gold.xlsx", [["Main Road", "Total (USD)"], ["x", "y"]])
    near = book(tmp_path / "near.xlsx", [["Main Rd", "total usd"], ["x", "y"]])

    def fuzzy(*rls):
        return rules({"type": "sheet_fuzzy", "sheet_idx0": 0, "sheet_idx1": "EI0", "rules": list(rls)})

    assert compare_table(near, gold, **fuzzy({"range": ["A1:B2"], "type": "exact_match"})) == 0.0
    assert compare_table(near, gold, **fuzzy({"range": ["A1"], "type": "exact_match",
                                              "normalization": [["Rd", "Road"]]})) == 1.0
    assert compare_table(near, gold, **fuzzy({"range": ["B1"], "type": "exact_match", "ignore_case": True,
                                              "ignore_chars": "()"})) == 1.0
    assert compare_table(near, gold, **fuzzy({"range": ["A1"], "type": "fuzzy_match", "threshold": 80})) == 1.0
    assert compare_table(near, gold, **fuzzy({"range": ["A1"], "type": "fuzzy_match", "threshold": 95})) == 0.0
    assert compare_table(near, gold, **fuzzy({"range": ["A1"], "type": "included_by"})) == 0.0
    assert compare_table(gold, near, **fuzzy({"range": ["A1"], "type": "included_by",
                                              "normalization": [["Road", "Rd"]]})) == 1.0
    assert compare_table(gold, near, **fuzzy({"range": ["A2:B2"], "type": "includes"})) == 1.0
    signed = book(tmp_path / "signed.xlsx", [["Main Road", "Total (USD)"], ["+ x", "y++"]])
    assert compare_table(signed, gold, **fuzzy({"range": ["A2:B2"], "type": "exact_match"})) == 0.0
    assert compare_table(signed, gold, **fuzzy({"range": ["A2:B2"], "type": "exact_match", "trim_leadings": "+ ",
                                                "trim_trailings": "+"})) == 1.0
    with pytest.raises(TableRuleError):
        compare_table(near, gold, **fuzzy({"range": ["A1"], "type": "sounds_like"}))


def test_check_cell_values_and_styles(tmp_path):
    def styled(wb):
        ws = wb.active
        ws["B2"].font = Font(bold=True, color="FFFF0000")
        ws["C2"].fill = PatternFill("solid", fgColor="FF0000FF")
        ws.merge_cells("A6:B6")

    mine = book(tmp_path / "mine.xlsx", edit=styled)

    def cell(coordinate, **props):
        return rules({"type": "check_cell", "sheet_idx": 0, "coordinate": coordinate, "props": props})

    assert compare_table(mine, None, **cell("B2", value={"method": "eq", "ref": 120.0})) == 1.0
    assert compare_table(mine, None, **cell("B2", value={"method": "eq", "ref": 121.0})) == 0.0
    assert compare_table(mine, None, **cell("C2", value={"method": "approx:0.001", "ref": 0.1234})) == 1.0
    assert compare_table(mine, None, **cell("C2", value={"method": "approx:0.00001", "ref": 0.1234})) == 0.0
    assert compare_table(mine, None, **cell("A2", value={"method": "eq", "ref": "Ann"})) == 1.0
    assert compare_table(mine, None, **cell("B2", font_bold={"method": "eq", "ref": True},
                                            font_color={"method": "eq", "ref": "FFFF0000"})) == 1.0
    assert compare_table(mine, None, **cell("B3", font_bold={"method": "eq", "ref": True})) == 0.0
    assert compare_table(mine, None, **cell("C2", bgcolor={"method": "eq", "ref": "FF0000FF"})) == 1.0
    assert compare_table(mine, None, **cell("C3", bgcolor={"method": "eq", "ref": "FF0000FF"})) == 0.0
    assert compare_table(mine, None, **cell("B6", merge={"method": "eq", "ref": True})) == 1.0
    assert compare_table(mine, None, **cell("A6", merge={"method": "eq", "ref": True})) == 0.0
    # a named sheet of the result; an empty cell holds no value
    assert compare_table(mine, None, **rules({"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": "Z9",
                                              "props": {"value": {"method": "eq", "ref": None}}})) == 1.0


def test_freeze_zoom_rows_and_validation(tmp_path):
    def frozen(wb):
        wb.active.freeze_panes = "A2"
        wb.active.sheet_view.zoomScale = 80
        wb.active.row_dimensions[3].hidden = True
        dv = DataValidation(type="list", formula1='"Low,High"', allow_blank=True)
        dv.add("D2:D29")
        wb.active.add_data_validation(dv)

    gold = book(tmp_path / "gold.xlsx", edit=frozen)
    plain = book(tmp_path / "plain.xlsx")
    done = book(tmp_path / "done.xlsx", edit=frozen)
    pair = {"sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(done, gold, **rules({"type": "freeze", **pair})) == 1.0
    assert compare_table(plain, gold, **rules({"type": "freeze", **pair})) == 0.0
    assert compare_table(done, gold, **rules({"type": "row_props", "props": ["hidden"], **pair})) == 1.0
    assert compare_table(plain, gold, **rules({"type": "row_props", "props": ["hidden"], **pair})) == 0.0
    zoom = {"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 100}
    assert compare_table(done, None, **rules(zoom)) == 1.0
    assert compare_table(plain, None, **rules(zoom)) == 0.0  # unset reads 100
    dv_rule = {"type": "data_validation", "sheet_idx": 0, "dv_props": [
        {"ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D2:D1048576"]},
         "type": {"method": "eq", "ref": "list"}, "formula1": {"method": "eq", "ref": '"Low,High"'}}]}
    assert compare_table(done, None, **rules(dv_rule)) == 1.0
    assert compare_table(plain, None, **rules(dv_rule)) == 0.0


def test_auto_filters(tmp_path):
    def filtered(*names):
        def edit(wb):
            wb.active.auto_filter.ref = "A1:C4"
            wb.active.auto_filter.add_filter_column(0, list(names))
        return edit

    gold = book(tmp_path / "gold.xlsx", edit=filtered("Ann", "Bob"))
    rule = {"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}
    assert compare_table(book(tmp_path / "a.xlsx", edit=filtered("Bob", "Ann")), gold, **rules(rule)) == 1.0
    assert compare_table(book(tmp_path / "b.xlsx", edit=filtered("Ann")), gold, **rules(rule)) == 0.0
    assert compare_table(book(tmp_path / "c.xlsx"), gold, **rules(rule)) == 0.0


def test_charts_keyed_by_their_data(tmp_path):
    def chart(kind, title, rows="B1:B4"):
        def edit(wb):
            ws = wb.active
            ch = kind()
            ch.title = title
            ch.add_data(Reference(ws, range_string=f"Sheet1!{rows}"), titles_from_data=True)
            ch.set_categories(Reference(ws, range_string="Sheet1!A2:A4"))
            ws.add_chart(ch, "E2")
        return edit

    gold = book(tmp_path / "gold.xlsx", edit=chart(BarChart, "Sales"))
    rule = {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["type", "title"]}
    assert compare_table(book(tmp_path / "a.xlsx", edit=chart(BarChart, "Sales")), gold, **rules(rule)) == 1.0
    assert compare_table(book(tmp_path / "b.xlsx", edit=chart(LineChart, "Sales")), gold, **rules(rule)) == 0.0
    assert compare_table(book(tmp_path / "c.xlsx", edit=chart(BarChart, "Sale")), gold, **rules(rule)) == 0.0
    assert compare_table(book(tmp_path / "d.xlsx", edit=chart(BarChart, "Sales", "C1:C4")), gold,
                         **rules(rule)) == 0.0  # another column charted
    assert compare_table(book(tmp_path / "e.xlsx"), gold, **rules(rule)) == 0.0  # no chart at all


def test_pivot_fields_count_from_the_first_used_source_column():
    # the same pivot over A1:E9 with column A unused, and over B1:E9: the same fields, the same source
    def pvt(ref, offset):
        fields = [SimpleNamespace(items=[]) for _ in range(offset)] + [
            SimpleNamespace(items=[SimpleNamespace(h=None, x=0), SimpleNamespace(h=None, x=1)]),
            SimpleNamespace(items=[SimpleNamespace(h=True, x=0)]),
            SimpleNamespace(items=[SimpleNamespace(h=None, x=None)]), SimpleNamespace(items=[])]
        source = SimpleNamespace(type="worksheet", worksheetSource=SimpleNamespace(ref=ref, sheet="Data"))
        return SimpleNamespace(
            pivotFields=fields, cache=SimpleNamespace(cacheSource=source), name="P", pageFields=[],
            colFields=[], rowFields=[SimpleNamespace(x=offset)],
            dataFields=[SimpleNamespace(fld=offset + 2, name="Sum", subtotal="sum", showDataAs=None)])

    props = ["row_fields", "data_fields", "filter"]
    a = pivots_of(SimpleNamespace(_pivots=[pvt("A1:E9", 1)]), props)
    b = pivots_of(SimpleNamespace(_pivots=[pvt("B1:E9", 0)]), props)
    assert a == b
    assert list(a.values())[0]["row_fields"] == [0]
    assert list(a.values())[0]["data_fields"] == ["2;;sum;None"]
    c = pivots_of(SimpleNamespace(_pivots=[pvt("B1:E9", 0)]), props + ["ordered"])
    assert list(c.values())[0]["selection"] == [[(None, 0), (None, 1)], [(True, 0)]]


def test_rules_stop_at_the_first_failure_and_bad_results_score_zero(tmp_path):
    gold = book(tmp_path / "gold.xlsx")
    mine = book(tmp_path / "mine.xlsx", sheets=("Other",))
    assert compare_table(mine, gold, **rules({"type": "sheet_name"}, data_rule())) == 0.0
    assert compare_table(None, gold, **rules(data_rule())) == 0.0
    assert compare_table(str(tmp_path / "absent.xlsx"), gold, **rules(data_rule())) == 0.0
    (tmp_path / "broken.xlsx").write_bytes(b"not a zip")
    assert compare_table(str(tmp_path / "broken.xlsx"), gold, **rules(data_rule())) == 0.0


def test_rules_not_implemented_are_named_at_load_and_refused_at_scoring(tmp_path):
    opts = rules({"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["bgcolor"]}, data_rule())
    assert unsupported_table_rules(opts) == ["style"]
    assert unsupported_table_rules(rules(data_rule())) == []
    with pytest.raises(TableRuleError, match="style"):
        compare_table(book(tmp_path / "a.xlsx"), book(tmp_path / "b.xlsx"), **opts)


def _renumber_sheets(path: str, ids: dict[str, str]) -> None:
    """Give the sheets other sheetIds (their parts keep their names), as some writers do."""
    src = Path(path).read_bytes()
    tmp = Path(path + ".tmp")
    tmp.write_bytes(src)
    with zipfile.ZipFile(tmp) as zin, zipfile.ZipFile(path, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item)
            if item.filename == "xl/workbook.xml":
                text = data.decode()
                for name, sheet_id in ids.items():
                    text = re.sub(rf'(<sheet[^>]*name="{name}"[^>]*sheetId=")\d+', rf"\g<1>{sheet_id}", text)
                data = text.encode()
            zout.writestr(item, data)
    tmp.unlink()


def test_read_cell_value_reads_the_saved_values(tmp_path):
    def edit(wb):
        ws = wb["Second"]
        ws["A1"] = "shared text"
        ws["B1"] = 2.5
        ws["C1"] = True
        ws["D1"] = "=B1*2"  # openpyxl saves no computed value: the cell holds nothing to compare yet

    path = book(tmp_path / "v.xlsx", sheets=("First", "Second"), edit=edit)
    _renumber_sheets(path, {"First": "7", "Second": "9"})
    assert read_cell_value(path, "Second", "A1") == "shared text"
    assert read_cell_value(path, "Second", "B1") == 2.5
    assert read_cell_value(path, "Second", "C1") is True
    assert read_cell_value(path, "Second", "D1") is None
    assert read_cell_value(path, "First", "B2") == 120.0
    assert read_cell_value(path, "Second", "Z99") is None
    assert read_cell_value(path, "Missing", "A1") is None
    assert read_cell_value(str(tmp_path / "absent.xlsx"), "First", "A1") is None


@pytest.mark.parametrize("value,rule,expected", [
    (5, {"method": "gt", "ref": 3}, True), (5, {"method": "le", "ref": 3}, False),
    (None, {"method": "lt", "ref": 3}, False), ("Total 12", {"method": "re", "ref": r"\d+"}, True),
    ("TOTAL", {"method": "re.I", "ref": "total"}, True), ("TOTAL", {"method": "re", "ref": "total"}, False),
    (2.0, {"method": "range.te", "ref": [0, 2]}, True), (0, {"method": "range.te", "ref": [0, 2]}, False),
    ("'a,b,c'", {"method": "str_list_eq", "ref": ["a", "b", "c"]}, True),
    ("c,a,b", {"method": "str_set_eq", "ref": ["a", "b", "c"]}, True),
    ("c,a,b", {"method": "str_list_eq", "ref": ["a", "b", "c"]}, False),
    ("x", {"method": "approx:0.1", "ref": 1.0}, False),
])
def test_value_rules(value, rule, expected):
    assert match_value_to_rule(value, rule) is expected


def test_compare_csv(tmp_path):
    (tmp_path / "out.csv").write_text("a,b\n1,2 \n")
    (tmp_path / "gold.csv").write_text("a,b\n1,2\n")
    (tmp_path / "alt.csv").write_text("A,B\n1,2 \n")
    out, gold, alt = (str(tmp_path / n) for n in ("out.csv", "gold.csv", "alt.csv"))
    assert compare_csv(out, gold) == 0.0  # strict by default: the trailing blank differs
    assert compare_csv(out, gold, strict=False) == 1.0
    assert compare_csv(out, [gold, alt]) == 0.0
    assert compare_csv(out, [gold, alt], ignore_case=True) == 1.0  # any of the expected files
    assert compare_csv(None, gold) == 0.0
    assert compare_csv(str(tmp_path / "absent.csv"), gold) == 0.0
