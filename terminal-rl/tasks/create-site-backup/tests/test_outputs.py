import tarfile
from pathlib import Path

ARCHIVE = Path("/app/site-backup.tar.gz")
EXPECTED_FILES = {
    "site/index.html": b"<h1>Home</h1>\n",
    "site/css/main.css": b"body { color: #333; }\n",
    "site/img/logo.png": b"PNGDATA",
    "site/blog/2024/first-post.html": b"<p>first post</p>\n",
    "site/CHANGELOG.log.txt": b"Changelog: see CHANGELOG.log.txt\n",
}


def members():
    assert ARCHIVE.is_file(), "/app/site-backup.tar.gz was not created"
    with tarfile.open(ARCHIVE, "r:gz") as tar:  # fails if it is not gzip-compressed
        out = {}
        for m in tar.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            out[name.rstrip("/")] = tar.extractfile(m).read() if m.isfile() else None
        return out


def test_paths_start_with_site():
    got = members()
    assert got and all(name == "site" or name.startswith("site/") for name in got)


def test_logs_and_cache_excluded():
    got = members()
    assert got
    assert not any(name.endswith(".log") for name in got)
    assert not any(name == "site/cache" or name.startswith("site/cache/") for name in got)


def test_every_other_file_with_content():
    files = {name: data for name, data in members().items() if data is not None}
    assert files == EXPECTED_FILES
