import gzip
from pathlib import Path

OUT = Path("/app/combined.log")
LOGS = Path("/app/logs")


def combined():
    assert OUT.is_file(), "/app/combined.log was not created"
    return OUT.read_text().splitlines()


def test_line_count():
    assert len(combined()) == 15 + 14 + 13 + 12  # app.log.3.gz (15), .2.gz (14), .1 (13), app.log (12)


def test_no_compressed_bytes():
    assert OUT.is_file() and not OUT.read_bytes().startswith(b"\x1f\x8b")
    assert all(line.startswith("2024-06-") for line in combined())


def test_chronological_order():
    lines = combined()
    assert lines and lines == sorted(lines)
    assert lines[0].endswith("gen3 event 0") and lines[-1].endswith("gen0 event 11")


def test_exact_content_and_originals_kept():
    expected = (
        gzip.decompress((LOGS / "app.log.3.gz").read_bytes()).decode()
        + gzip.decompress((LOGS / "app.log.2.gz").read_bytes()).decode()
        + (LOGS / "app.log.1").read_text()
        + (LOGS / "app.log").read_text()
    )
    assert OUT.read_text() == expected
    assert len(expected.splitlines()) == 54
