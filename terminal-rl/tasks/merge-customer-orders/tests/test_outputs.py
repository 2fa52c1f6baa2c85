import csv
from pathlib import Path

OUT = Path("/app/report.csv")
EXPECTED = [
    ["Acme Corp", "US", "8", "1494.20"],
    ["Cobalt GmbH", "DE", "12", "1165.04"],
    ["Delta Foods", "US", "8", "860.68"],
    ["Echo Labs", "FR", "4", "588.72"],
    ["Birch & Sons", "UK", "8", "227.16"],
    ["Fjord AS", "NO", "0", "0.00"],
]


def rows():
    assert OUT.is_file(), "/app/report.csv was not created"
    with OUT.open(newline="") as f:
        return list(csv.reader(f))


def test_header():
    assert rows()[0] == ["name", "country", "orders", "total"]


def test_customer_without_orders_listed():
    assert ["Fjord AS", "NO", "0", "0.00"] in rows()[1:]


def test_totals_have_two_decimals():
    body = rows()[1:]
    assert len(body) == 6
    for r in body:
        whole, _, frac = r[3].partition(".")
        assert whole.isdigit() and len(frac) == 2 and frac.isdigit(), r


def test_exact_report_sorted_by_total():
    assert rows()[1:] == EXPECTED
