from pathlib import Path

OUT = Path("/app/names.txt")


def names():
    assert OUT.is_file(), "/app/names.txt was not created"
    return [line.strip() for line in OUT.read_text().splitlines() if line.strip()]


def test_boundary_age_30_included():
    assert "Aiko" in names()


def test_inactive_and_young_excluded():
    got = names()
    assert got, "no names written"
    for name in ("Bruno", "Carlos", "Tom", "Liam"):
        assert name not in got


def test_exact_sorted_list():
    assert names() == ["Aiko", "Mei", "Olga", "Priya", "Zara"]
