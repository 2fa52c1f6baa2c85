import os
import stat
from pathlib import Path

SRV = Path("/app/srv")
EXPECTED_MODES = {
    "www/index.html": 0o644, "www/about.html": 0o644, "data/users.db": 0o664, "data/cache/tmp1": 0o775,
    "data/cache/tmp2": 0o600, "scripts/backup.sh": 0o755, "scripts/run.sh": 0o775, "README": 0o664,
}


def test_report_lists_the_world_writable_files():
    out = Path("/app/world_writable.txt")
    assert out.is_file(), "/app/world_writable.txt was not created"
    lines = [l.strip() for l in out.read_text().splitlines() if l.strip()]
    assert lines == ["data/cache/tmp1", "data/cache/tmp2", "data/users.db", "scripts/backup.sh", "www/index.html"]


def test_no_file_is_world_writable():
    for rel in EXPECTED_MODES:
        assert not os.stat(SRV / rel).st_mode & stat.S_IWOTH, rel


def test_other_bits_preserved():
    got = {rel: stat.S_IMODE(os.stat(SRV / rel).st_mode) for rel in EXPECTED_MODES}
    assert got == EXPECTED_MODES
