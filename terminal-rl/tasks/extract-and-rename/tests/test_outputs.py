import os
from pathlib import Path

ROOT = Path("/app/extracted")
EXPECTED = {
    "bundle/README.md": "Welcome\n",
    "bundle/docs/install.md": "Install with make\n",
    "bundle/docs/api/endpoints.md": "GET /items\n",
    "bundle/docs/release notes.md": "release notes v2\n",
    "bundle/data/values.csv": "1,2,3\n",
    "bundle/data/config.txt.bak": "not a text file\n",
}


def files():
    assert ROOT.is_dir(), "/app/extracted was not created"
    out = {}
    for dirpath, _, names in os.walk(ROOT):
        for name in names:
            p = Path(dirpath, name)
            out[str(p.relative_to(ROOT))] = p.read_text()
    return out


def test_no_txt_files_left():
    got = files()
    assert got and not any(name.endswith(".txt") for name in got)


def test_exact_tree():
    assert files() == EXPECTED


def test_archive_kept():
    assert files()
    assert Path("/app/bundle.tar.gz").is_file()
