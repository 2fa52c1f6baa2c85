import subprocess
import tempfile
from pathlib import Path


def run_backup(files, src_name="my docs", dest_name="backup dir/nested"):
    d = Path(tempfile.mkdtemp())
    src, dest = d / src_name, d / dest_name
    src.mkdir(parents=True)
    for name, text in files.items():
        (src / name).write_text(text)
    (src / "sub.txt").mkdir()  # a directory is not a file to copy
    out = subprocess.run(["bash", "/app/backup.sh", str(src), str(dest)], capture_output=True, text=True, timeout=20)
    copied = {p.name: p.read_text() for p in dest.iterdir()} if dest.is_dir() else {}
    return out, copied


def test_plain_names():
    out, copied = run_backup({"a.txt": "1\n", "b.txt": "2\n"}, "src", "dest")
    assert out.stdout.strip() == "copied 2 files"
    assert copied == {"a.txt.bak": "1\n", "b.txt.bak": "2\n"}


def test_spaces_in_directory_and_file_names():
    out, copied = run_backup({"meeting notes.txt": "m\n", "x.txt": "x\n"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "copied 2 files"
    assert copied == {"meeting notes.txt.bak": "m\n", "x.txt.bak": "x\n"}


def test_only_names_ending_in_txt():
    out, copied = run_backup({"keep.txt": "k\n", "notes.txt.old": "o\n", "mytxt": "n\n", "data.csv": "c\n"}, "in", "out")
    assert out.stdout.strip() == "copied 1 files"
    assert copied == {"keep.txt.bak": "k\n"}
