import csv
from pathlib import Path

OUT = Path("/app/sums.csv")
EXPECTED = {"q1": "3642", "q2": "4354", "q3": "4566", "q4": "4278"}


def rows():
    assert OUT.is_file(), "/app/sums.csv was not created"
    with OUT.open(newline="") as f:
        return list(csv.reader(f))


def test_header():
    assert rows()[0] == ["column", "sum"]


def test_one_line_per_quarter_in_order():
    assert [r[0] for r in rows()[1:]] == ["q1", "q2", "q3", "q4"]


def test_sums():
    got = {r[0]: r[1] for r in rows()[1:]}
    assert got == EXPECTED
