import subprocess

REPO = "/app/repo"


def git(*args, check=True):
    out = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, timeout=20)
    if check:
        assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def bump_commit():
    for line in git("log", "--format=%H%x09%s").splitlines():
        sha, subject = line.split("\t", 1)
        if subject == "Bump version to 1.2.0":
            return sha
    raise AssertionError("the commit is missing")


def test_tag_points_to_the_bump_commit():
    assert git("rev-parse", "v1.2.0^{commit}") == bump_commit()


def test_tag_is_annotated():
    assert git("cat-file", "-t", "v1.2.0") == "tag"


def test_release_branch():
    assert git("rev-parse", "refs/heads/release-1.2") == bump_commit()


def test_main_unchanged():
    assert git("rev-parse", "--verify", "-q", "refs/heads/release-1.2", check=False), "branch missing"
    assert git("log", "-1", "--format=%s", "main") == "Add feature after 1.3.0 (mentions: Bump version to 1.3.0)"
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git("status", "--porcelain") == ""
