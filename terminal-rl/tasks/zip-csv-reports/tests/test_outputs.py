import zipfile
from pathlib import Path

ZIP = Path("/app/reports.zip")
EXPECTED = {
    "summary.csv": b"month,revenue\njan,100\n",
    "revenue-2023.csv": b"month,revenue\njan,80\n",
    "revenue-2024-q1.csv": b"month,revenue\njan,120\n",
}


def entries():
    assert ZIP.is_file(), "/app/reports.zip was not created"
    with zipfile.ZipFile(ZIP) as z:
        assert z.testzip() is None
        return {i.filename: z.read(i) for i in z.infolist() if not i.is_dir()}


def test_flat_names():
    got = entries()
    assert got and all("/" not in name for name in got)


def test_only_csv_files():
    got = entries()
    assert got and all(name.endswith(".csv") for name in got)


def test_exact_contents():
    assert entries() == EXPECTED
