import os
from pathlib import Path

SORTED = Path("/app/sorted")
EXPECTED = {
    "pdf/report.PDF": b"%PDF-1.4 quarterly report\n",
    "txt/notes.txt": b"buy milk\n",
    "txt/meeting notes.txt": b"meeting notes\n",
    "jpg/photo.jpg": b"JPEGDATA1",
    "jpg/IMG_0042.JPG": b"JPEGDATA2",
    "gz/backup.tar.gz": b"tarball",
    "other/README": b"read me first\n",
    "other/Makefile": b"no extension either\n",
    "csv/data.csv": b"a,b\n1,2\n",
    "sh/install.sh": b"echo hi\n",
}


def files_under(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = Path(dirpath, name)
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_inbox_is_empty():
    assert SORTED.is_dir(), "/app/sorted was not created"
    inbox = Path("/app/inbox")
    assert not inbox.exists() or not any(inbox.iterdir()), "files are left in /app/inbox"


def test_lowercase_extension_folders():
    assert sorted(p.name for p in SORTED.iterdir()) == ["csv", "gz", "jpg", "other", "pdf", "sh", "txt"]


def test_every_file_moved_with_its_content():
    assert files_under(SORTED) == EXPECTED
