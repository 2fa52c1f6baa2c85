from pathlib import Path

OUT = Path("/app/large_files.txt")
EXPECTED = [
    "250880 build/output.bin",
    "120003 src/vendor/big_table.h",
    "77777 docs/manual.pdf",
    "48211 assets/logo.png",
    "31337 build/.cache/index",
    "14250 src/main.c",
    "10001 assets/icons/medium.png",
]


def lines():
    assert OUT.is_file(), "/app/large_files.txt was not created"
    return [line.strip() for line in OUT.read_text().splitlines() if line.strip()]


def test_boundary_sizes():
    got = lines()
    assert "10001 assets/icons/medium.png" in got
    assert not any(line.endswith("small.png") or line.endswith("util.c") for line in got)


def test_hidden_directories_included_and_symlinks_skipped():
    got = lines()
    assert "31337 build/.cache/index" in got
    assert not any("output-link" in line for line in got)


def test_exact_list_biggest_first():
    assert lines() == EXPECTED


def test_nothing_deleted():
    assert lines()
    assert len([p for p in Path("/app/project").rglob("*") if p.is_file() and not p.is_symlink()]) == 11
