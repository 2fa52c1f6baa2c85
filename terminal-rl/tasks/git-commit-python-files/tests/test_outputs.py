import subprocess

REPO = "/app/repo"


def git(*args):
    out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_new_commit_on_top_of_the_initial_one():
    subjects = git("log", "--format=%s").splitlines()
    assert subjects == ["Add CSV parser", "Initial commit"]


def test_commit_contains_exactly_the_python_changes():
    files = sorted(git("show", "--name-only", "--format=", "HEAD").split())
    assert files == ["app/main.py", "app/parser.py", "test_parser.py"]


def test_other_changes_left_uncommitted():
    assert "Add CSV parser" in git("log", "-1", "--format=%s")
    status = sorted(git("status", "--porcelain").splitlines())
    assert status == [" M notes.txt", "?? scratch.log"]


def test_committed_content():
    assert "Add CSV parser" in git("log", "-1", "--format=%s")
    assert git("show", "HEAD:app/parser.py") == 'def parse(line):\n    return line.split(",")\n'
