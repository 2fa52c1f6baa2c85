from pathlib import Path

DATA = Path("/app/data")
REMOVED = Path("/app/removed.txt")
KEPT = ["beta.txt", "blob (1).bin", "copy of notes_v1.txt", "empty.log", "settings-old.cfg", "settings.cfg"]
DELETED = ["blob.bin", "notes_final.txt", "notes_v1.txt", "settings.cfg.bak", "zero.log", "zz_blob.bin"]


def test_removed_list():
    assert REMOVED.is_file(), "/app/removed.txt was not created"
    assert [l for l in REMOVED.read_text().splitlines() if l] == DELETED


def test_remaining_files():
    assert sorted(p.name for p in DATA.iterdir()) == KEPT


def test_near_duplicates_kept_and_unchanged():
    # settings-old.cfg differs from settings.cfg by one byte: not a duplicate
    assert (DATA / "settings-old.cfg").read_bytes() == b"config: 1\n\n"
    assert (DATA / "settings.cfg").read_bytes() == b"config: 1\n"
    assert not (DATA / "settings.cfg.bak").exists()
