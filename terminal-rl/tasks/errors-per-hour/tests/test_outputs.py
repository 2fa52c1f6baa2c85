from pathlib import Path

OUT = Path("/app/errors_per_hour.csv")
EXPECTED = [
    "2024-05-01T22,2",
    "2024-05-01T23,0",
    "2024-05-02T00,7",
    "2024-05-02T01,9",
    "2024-05-02T02,8",
    "2024-05-02T03,7",
]


def lines():
    assert OUT.is_file(), "/app/errors_per_hour.csv was not created"
    return [line.strip() for line in OUT.read_text().splitlines() if line.strip()]


def test_header():
    assert lines()[0] == "hour,errors"


def test_quiet_hour_listed_with_zero():
    assert "2024-05-01T23,0" in lines()


def test_hours_in_chronological_order_across_midnight():
    hours = [line.split(",")[0] for line in lines()[1:]]
    assert hours == [row.split(",")[0] for row in EXPECTED]


def test_exact_counts():
    assert lines()[1:] == EXPECTED
