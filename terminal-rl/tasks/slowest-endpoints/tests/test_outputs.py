from pathlib import Path

OUT = Path("/app/slowest.txt")
EXPECTED = [("/api/orders", "497.3"), ("/static/app.js", "213.3"), ("/api/items", "209.8")]


def rows():
    assert OUT.is_file(), "/app/slowest.txt was not created"
    return [tuple(line.split()) for line in OUT.read_text().splitlines() if line.strip()]


def test_three_lines():
    got = rows()
    assert len(got) == 3 and all(len(r) == 2 for r in got)


def test_query_strings_merged_into_their_path():
    # /api/orders and /api/orders?id=7 are one endpoint; the slowest by far
    assert rows()[0] == EXPECTED[0]


def test_exact_ranking_and_averages():
    assert rows() == EXPECTED
