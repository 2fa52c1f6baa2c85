"""What a submitted patch may be, checked before anything is applied (pure functions, no repository needed).

The format check is upstream's (both sides of its exec server apply it): non-empty, has ``diff --git ``, a
``--- a/`` or ``--- /dev/null`` line and a ``+++ b/`` line (git's quoted forms ``--- "a/...`` of paths with
unusual characters count too). On top of it the sealed evaluation refuses, with a
reason, any patch that

* touches a test: a path with a ``tests``, ``test`` or ``testing`` folder, a ``test_*.py`` or ``*_test.py`` file,
  or a ``conftest.py`` (editing, adding, deleting or renaming all count);
* touches what decides how the tests run: pytest's configuration files (``pytest.ini``, ``.pytest.ini``,
  ``tox.ini``, ``setup.cfg``, ``pyproject.toml``), interpreter start-up hooks (``sitecustomize.py``,
  ``usercustomize.py``, ``*.pth``), or adds a top-level module at an import root whose name shadows the standard
  library or the test harness (a new ``unittest.py`` could turn every assertion into a no-op);
* leaves the repository: an absolute path, a ``..`` component, a path into ``.git``, a path without git's ``a/``
  / ``b/`` prefix, or any symbolic link (created, changed or removed: a link can point anywhere);
* is binary (``GIT binary patch``): the agent's diffs are text.

Whether it applies is checked against the fresh tree by :mod:`.evaluate` (``git apply --check``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

HARNESS_MODULES = frozenset({"pytest", "_pytest", "pluggy", "py", "iniconfig", "packaging", "xdist", "junitparser"})
CONFIG_FILES = frozenset({"pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "conftest.py",
                          "sitecustomize.py", "usercustomize.py"})
TEST_DIRS = frozenset({"tests", "test", "testing"})
SYMLINK_MODE = "120000"

_DIFF_GIT = re.compile(r"^diff --git (?P<rest>.+)$")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"'}


@dataclass(frozen=True)
class PatchCheck:
    ok: bool
    reason: str = ""
    files: tuple[str, ...] = ()  # every path the patch names (without the a/ b/ prefix)


def unquote_path(text: str) -> str:
    """git's C-style quoted path (``"a/x\\tb"``) -> the path; an unquoted one is returned as it is."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in "01234567" and i + 3 < len(body) + 1 and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4] or ""):
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out += _ESCAPES.get(n, n).encode()
            i += 2
            continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _split_header_path(value: str) -> str:
    """The path of a ``---``/``+++`` line (a tab may separate a timestamp)."""
    value = value.rstrip("\n")
    if value.startswith('"'):
        end = value.find('"', 1)
        while end > 0 and value[end - 1] == "\\":
            end = value.find('"', end + 1)
        return unquote_path(value[: end + 1]) if end > 0 else value
    return value.split("\t", 1)[0]


def is_test_path(path: str) -> bool:
    """A file of the test suite: under a tests/test/testing folder, ``test_*.py``, ``*_test.py``, ``conftest.py``."""
    parts = path.split("/")
    name = parts[-1]
    return (any(p in TEST_DIRS for p in parts[:-1]) or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


def is_test_config_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name in CONFIG_FILES or name.endswith(".pth")


def _shadowing_module(path: str, import_roots: Iterable[str]) -> str | None:
    """The top-level module name `path` would define at one of the import roots, when it shadows the standard
    library or the harness; else None."""
    for root in import_roots:
        prefix = "" if root in ("", ".") else root.strip("/") + "/"
        if prefix and not path.startswith(prefix):
            continue
        rest = path[len(prefix):].split("/")
        if len(rest) == 1:
            name = rest[0].split(".", 1)[0] if "." in rest[0] else None
        elif len(rest) == 2 and rest[1].startswith("__init__."):
            name = rest[0]
        else:
            name = None
        if name and (name in sys.stdlib_module_names or name in HARNESS_MODULES):
            return name
    return None


def _unsafe(path: str) -> str | None:
    if path.startswith("/") or path.startswith("\\"):
        return f"absolute path {path!r}"
    parts = path.split("/")
    if any(p in ("..", ".", "") for p in parts):
        return f"path {path!r} leaves the repository (a '..', '.' or empty component)"
    if any(p.lower() == ".git" for p in parts):
        return f"path {path!r} is inside .git"
    if "\0" in path or "\\" in path:
        return f"path {path!r} has a NUL or a backslash"
    return None


def patch_format_problem(patch: str) -> str | None:
    """Upstream's validity check; None when the patch passes it."""
    if not patch or not patch.strip():
        return "empty patch"
    if "diff --git " not in patch:
        return "not a git diff (no 'diff --git ' line)"
    text = "\n" + patch
    if not any(h in text for h in ("\n--- a/", "\n--- /dev/null", '\n--- "a/')):
        return "not a git diff (no '--- a/' or '--- /dev/null' line)"
    if not any(h in text for h in ("\n+++ b/", '\n+++ "b/')):
        return "not a git diff (no '+++ b/' line)"
    return None


_HUNK = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")


def patch_paths(patch: str) -> tuple[list[str], list[str]]:
    """(every path the patch names, problems found in its headers). Paths come from ``diff --git``, ``---``,
    ``+++``, rename/copy lines; problems are unprefixed or absolute header paths, symlink modes, binary hunks.
    Hunk bodies are skipped by their line counts, so a content line such as ``--- a/x`` is never read as a header."""
    paths: list[str] = []
    problems: list[str] = []
    old_left = new_left = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            elif tag == "\\":
                pass
            else:
                problems.append(f"a hunk ends early (line {line[:60]!r})")
                old_left = new_left = 0
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk.group("old") if hunk.group("old") is not None else 1)
            new_left = int(hunk.group("new") if hunk.group("new") is not None else 1)
        elif line.startswith("diff --git "):
            for token in _diff_git_paths(line[len("diff --git "):]):
                if token.startswith(("a/", "b/")):
                    paths.append(token[2:])
                else:
                    problems.append(f"'diff --git' names {token!r} without the a/ or b/ prefix")
        elif line.startswith(("--- ", "+++ ")):
            path = _split_header_path(line[4:])
            if path == "/dev/null":
                continue
            want = "a/" if line.startswith("---") else "b/"
            if path.startswith(want):
                paths.append(path[2:])
            else:
                problems.append(f"header {line[:3]} names {path!r} (expected {want}... or /dev/null)")
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            paths.append(unquote_path(line.split(" ", 2)[2]))
        elif line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            if line.rsplit(" ", 1)[-1] == SYMLINK_MODE:
                problems.append("the patch creates, changes or removes a symbolic link")
        elif line.startswith("index ") and line.rsplit(" ", 1)[-1] == SYMLINK_MODE:
            problems.append("the patch changes a symbolic link")
        elif line.startswith("GIT binary patch") or (line.startswith("Binary files ") and line.endswith(" differ")):
            problems.append("binary patches are not accepted")
    return list(dict.fromkeys(paths)), problems


def _diff_git_paths(rest: str) -> list[str]:
    """The two paths of ``diff --git a/x b/x`` (quoted or not; unquoted ones split at the middle ' b/')."""
    rest = rest.strip()
    if rest.startswith('"'):
        end = rest.find('"', 1)
        while end > 0 and rest[end - 1] == "\\":
            end = rest.find('"', end + 1)
        first, second = rest[: end + 1], rest[end + 1:].strip()
        return [unquote_path(first), unquote_path(second)]
    if rest.endswith('"'):
        start = rest.rfind(' "')
        return [rest[:start], unquote_path(rest[start + 1:])]
    half = rest.find(" b/")
    if half < 0:
        return rest.split(" ", 1)
    return [rest[:half], rest[half + 1:]]


MAX_PATCH_BYTES = 4 << 20  # SWE-bench's gold patches are kilobytes; a 50 MB diff is refused before anything reads it


def validate_patch(patch: str, import_roots: Iterable[str] = (".",)) -> PatchCheck:
    """Format and path rules of the module docstring; ``ok`` False with the first reason found. A patch over
    MAX_PATCH_BYTES is refused first, unread."""
    if len(patch) > MAX_PATCH_BYTES or len(patch.encode("utf-8", "surrogateescape")) > MAX_PATCH_BYTES:
        return PatchCheck(False, f"the patch is larger than {MAX_PATCH_BYTES >> 20} MiB")
    problem = patch_format_problem(patch)
    if problem:
        return PatchCheck(False, problem)
    paths, problems = patch_paths(patch)
    if problems:
        return PatchCheck(False, problems[0], tuple(paths))
    if not paths:
        return PatchCheck(False, "the patch names no file")
    roots = tuple(import_roots)
    for path in paths:
        unsafe = _unsafe(path)
        if unsafe:
            return PatchCheck(False, unsafe, tuple(paths))
    for path in paths:
        if is_test_path(path):
            return PatchCheck(False, f"the patch touches the test file {path!r} (tests are not the agent's to change)",
                              tuple(paths))
        if is_test_config_path(path):
            return PatchCheck(False, f"the patch touches {path!r}, which configures the test run", tuple(paths))
        shadow = _shadowing_module(path, roots)
        if shadow:
            return PatchCheck(False, f"the patch adds {path!r}, a top-level module {shadow!r} that shadows the "
                                     "standard library or the test harness", tuple(paths))
    return PatchCheck(True, "", tuple(paths))


__all__ = ["MAX_PATCH_BYTES", "PatchCheck", "is_test_config_path", "is_test_path", "patch_format_problem", "patch_paths",
           "unquote_path", "validate_patch"]
