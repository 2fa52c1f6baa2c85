from pathlib import Path

DOCS = Path("/app/docs")
EXPECTED = {
    "install.md": "# Install\n\nRun the installer.\n   Indented line stays indented.\n\n",
    "usage.md": "Usage\n=====\n\n* start\n* stop\n",
    "CHANGES.md": "Changelog\n\n  - 1.0: first release\n",
}


def test_no_carriage_returns():
    for name in EXPECTED:
        assert b"\r" not in (DOCS / name).read_bytes(), name


def test_no_trailing_whitespace():
    for name in EXPECTED:
        for line in (DOCS / name).read_text().split("\n"):
            assert line == line.rstrip(), f"{name}: {line!r}"


def test_exact_contents():
    for name, text in EXPECTED.items():
        assert (DOCS / name).read_text() == text, name


def test_other_files_untouched():
    assert (DOCS / "notes.txt").read_bytes() == b"keep me as I am  \r\n"
    assert sorted(p.name for p in DOCS.iterdir()) == ["CHANGES.md", "install.md", "notes.txt", "usage.md"]
    assert b"\r" not in (DOCS / "usage.md").read_bytes()
