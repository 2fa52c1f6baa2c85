import subprocess
from pathlib import Path

REPO = "/app/repo"


def git(*args):
    out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def answer():
    p = Path("/app/answer.txt")
    assert p.is_file(), "/app/answer.txt was not created"
    return p.read_text().strip()


def test_answer_is_a_full_commit_hash():
    a = answer()
    assert len(a) == 40 and all(c in "0123456789abcdef" for c in a)
    assert git("cat-file", "-t", a) == "commit"


def test_answer_is_the_commit_that_added_the_key():
    # found by its subject, independently of how the agent searched
    log = dict(line.split("\t", 1)[::-1] for line in git("log", "--format=%H%x09%s").splitlines())
    assert answer() == log["Tune deployment for production"]


def test_file_path():
    p = Path("/app/file.txt")
    assert p.is_file(), "/app/file.txt was not created"
    assert p.read_text().strip() == "deploy/settings.yml"
