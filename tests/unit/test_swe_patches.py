"""What a submitted patch may be: upstream's format check, and the sealed evaluation's rules (no test file, no test
configuration, nothing outside the repository, no symbolic link, no binary hunk, no shadowing module); whether a
patch applies is git's answer (a throwaway repository, no sandbox)."""

from __future__ import annotations

import subprocess

import pytest

from slime.agentic.swe import repos
from slime.agentic.swe.evaluate import _apply
from slime.agentic.swe.patches import is_test_path, patch_paths, unquote_path, validate_patch


def edit(path: str, old: str = "a = 1", new: str = "a = 2") -> str:
    return (f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1 +1 @@\n-{old}\n+{new}\n")


def create(path: str, text: str = "x = 1", mode: str = "100644") -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\nindex 0000000..2222222\n--- /dev/null\n"
            f"+++ b/{path}\n@@ -0,0 +1 @@\n+{text}\n")


def delete(path: str) -> str:
    return (f"diff --git a/{path} b/{path}\ndeleted file mode 100644\nindex 2222222..0000000\n--- a/{path}\n"
            f"+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n")


SOURCE_FIX = edit("toolz/itertoolz.py", "    seq1 = iter(L1[1])", "    seq1 = iter(L1[0])")


def test_a_source_fix_passes():
    check = validate_patch(SOURCE_FIX)
    assert check.ok and check.files == ("toolz/itertoolz.py",)
    assert validate_patch(SOURCE_FIX + create("toolz/newmodule.py")).ok


@pytest.mark.parametrize("patch, reason", [
    ("", "empty patch"),
    ("   \n", "empty patch"),
    ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "no 'diff --git '"),
    ("diff --git a/x b/x\n+++ b/x\n", "'--- a/' or '--- /dev/null'"),
    ("diff --git a/x b/x\n--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", "'+++ b/'"),
])
def test_upstream_format_check(patch, reason):
    check = validate_patch(patch)
    assert not check.ok and reason in check.reason


@pytest.mark.parametrize("path", [
    "tests/test_lru.py", "toolz/tests/test_itertoolz.py", "test/test_api.py", "pkg/testing/helpers.py",
    "test_inflection.py", "pkg/util_test.py", "conftest.py", "src/pkg/conftest.py", "tests/__init__.py",
])
def test_editing_a_test_file_is_refused(path):
    assert is_test_path(path)
    check = validate_patch(SOURCE_FIX + edit(path))
    assert not check.ok and "test file" in check.reason and path in check.reason


def test_deleting_or_adding_tests_is_refused():
    assert "test file" in validate_patch(SOURCE_FIX + delete("tests/test_lru.py")).reason
    assert "test file" in validate_patch(SOURCE_FIX + create("tests/test_new.py")).reason
    rename = ("diff --git a/tests/test_a.py b/tests/skipped_a.txt\nsimilarity index 100%\n"
              "rename from tests/test_a.py\nrename to tests/skipped_a.txt\n")
    assert "test file" in validate_patch(SOURCE_FIX + rename).reason


def test_source_files_that_look_like_tests_only_by_substring_pass():
    for path in ("pkg/testutils.py", "pkg/contest.py", "pkg/attestation.py", "latest/x.py"):
        assert not is_test_path(path), path


@pytest.mark.parametrize("name", ["pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py",
                                  "pkg/usercustomize.py", "evil.pth"])
def test_test_run_configuration_is_refused(name):
    check = validate_patch(SOURCE_FIX + create(name))
    assert not check.ok and "configures the test run" in check.reason


@pytest.mark.parametrize("path, roots", [("unittest.py", (".",)), ("pytest.py", (".",)), ("_pytest/__init__.py", (".",)),
                                         ("src/json/__init__.py", ("src",)), ("src/re.py", ("src",))])
def test_modules_shadowing_stdlib_or_harness_are_refused(path, roots):
    check = validate_patch(create(path), import_roots=roots)
    assert not check.ok and "shadows" in check.reason
    # the same name deeper in a package is harmless
    assert validate_patch(create(f"pkg/sub/{path.rsplit('/', 1)[-1]}"), import_roots=roots).ok


@pytest.mark.parametrize("patch, words", [
    (edit("../outside.py"), "leaves the repository"),
    (edit("pkg/../../etc/passwd"), "leaves the repository"),
    (create("../escape.py"), "leaves the repository"),  # a /dev/null creation outside the repository
    (create("pkg/./x.py"), "leaves the repository"),
    (edit(".git/hooks/pre-commit"), "inside .git"),
    (edit(".GIT/config"), "inside .git"),
    ("diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ /etc/cron.d/x\n@@ -0,0 +1 @@\n+x\n", "'+++ b/'"),
    ("diff --git a//etc/passwd b//etc/passwd\n--- a//etc/passwd\n+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
     "absolute path"),
    ("diff --git /etc/x /etc/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "without the a/ or b/ prefix"),
    (create("link", "/etc/passwd", mode="120000"), "symbolic link"),
    ("diff --git a/l b/l\nindex 1111111..2222222 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-x\n+/etc\n", "symbolic link"),
    ("diff --git a/b.bin b/b.bin\nindex 1111111..2222222 100644\nGIT binary patch\nliteral 1\nIcmZ?l0000\n--- a/x\n+++ b/x\n",
     "binary"),
])
def test_paths_outside_the_repository_and_links_are_refused(patch, words):
    check = validate_patch(patch)
    assert not check.ok
    assert words in check.reason


def test_hunk_content_is_never_read_as_a_header():
    # a removed line "-- a/tests/x" and an added line "++ b/../x" inside a hunk are content, not headers
    patch = ("diff --git a/pkg/m.py b/pkg/m.py\nindex 1111111..2222222 100644\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
             "@@ -1,2 +1,2 @@\n--- a/tests/test_x.py\n+++ b/../x\n context\n")
    paths, problems = patch_paths(patch)
    assert paths == ["pkg/m.py"] and problems == []
    assert validate_patch(patch).ok
    # but a header hidden after a hunk that claims fewer lines than it has is read as one
    smuggled = SOURCE_FIX + "--- a/tests/test_x.py\n+++ b/tests/test_x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert "test file" in validate_patch(smuggled).reason


def test_quoted_paths_are_unquoted():
    assert unquote_path('"tests/t\\303\\251st.py"') == "tests/tést.py"
    assert unquote_path('"a\\tb"') == "a\tb"
    assert unquote_path("plain") == "plain"
    quoted = ('diff --git "a/tests/t\\303\\251st.py" "b/tests/t\\303\\251st.py"\n--- "a/tests/t\\303\\251st.py"\n'
              '+++ "b/tests/t\\303\\251st.py"\n@@ -1 +1 @@\n-a\n+b\n')
    paths, _ = patch_paths(quoted)
    assert paths == ["tests/tést.py"]
    assert "test file" in validate_patch(quoted).reason


@pytest.fixture()
def small_repo(tmp_path):
    tree = tmp_path / "repo"
    tree.mkdir()
    (tree / "pkg").mkdir()
    (tree / "pkg" / "m.py").write_text("a = 1\nb = 2\n")
    repos.git("init", "-q", str(tree))
    repos.git("add", "-A", cwd=tree)
    repos.git("commit", "-q", "-m", "base", cwd=tree)
    return tree


def test_git_apply_decides_whether_a_patch_applies(small_repo):
    good = "diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 3\n b = 2\n"
    stale = good.replace("-a = 1", "-a = 9")
    assert validate_patch(good).ok and validate_patch(stale).ok  # the rules cannot know
    assert _apply(small_repo, stale, check_only=True) is not None  # git can
    assert _apply(small_repo, good.rstrip("\n"), check_only=True) is None  # a missing final newline is tolerated
    assert _apply(small_repo, good) is None
    assert (small_repo / "pkg" / "m.py").read_text() == "a = 3\nb = 2\n"
    assert subprocess.run(["git", "-C", str(small_repo), "diff", "--quiet"]).returncode == 1


def test_a_patch_over_the_size_cap_is_refused_unread():
    from slime.agentic.swe.patches import MAX_PATCH_BYTES

    huge = create("toolz/blob.py", "x = '" + "a" * (50 << 20) + "'")  # a 50 MB diff
    check = validate_patch(huge)
    assert not check.ok and "larger than 4 MiB" in check.reason and check.files == ()
    assert validate_patch(create("toolz/blob.py", "x = '" + "a" * (MAX_PATCH_BYTES // 2) + "'")).ok
