import subprocess
from pathlib import Path

REPO = Path("/app/repo")


def git(*args, check=True):
    out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=20)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def test_artifacts_no_longer_tracked():
    files = git("ls-files").stdout.split()
    assert sorted(files) == [".gitignore", "README.md", "src/calc.py"]


def test_files_still_on_disk():
    assert git("ls-files").stdout.split().count(".gitignore") == 1
    assert (REPO / "build/lib/calc.so").read_text() == "binary"
    assert (REPO / "src/__pycache__/calc.cpython-311.pyc").read_text() == "PYC1"
    assert (REPO / "src/old.pyc").read_text() == "PYC2"


def test_ignored_from_now_on():
    for path in ("build/new.o", "src/x.pyc", "lib/deep/y.pyc"):
        assert git("check-ignore", "-q", "--no-index", path, check=False).returncode == 0, path
    assert git("check-ignore", "-q", "--no-index", "src/calc.py", check=False).returncode == 1


def test_one_commit_and_clean_tree():
    subjects = git("log", "--format=%s").stdout.splitlines()
    assert subjects == ["Stop tracking build artifacts", "Initial commit"]
    assert git("status", "--porcelain", "--untracked-files=all").stdout == ""
