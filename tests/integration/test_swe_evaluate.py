"""The sealed evaluation with real patches on a shipped instance (inflection): the gold patch resolves it; the empty
patch, a wrong fix, a patch that does not apply, patches that edit or delete the tests or write outside the
repository do not; a listed test missing from the report is not a pass; a hanging run times out; the tests run as
an unprivileged uid without network; an agent's working tree gives its diff without bytecode."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import socket

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.swe import repos
from slime.agentic.swe.check import DEFAULT_INSTANCES
from slime.agentic.swe.evaluate import _apply, evaluate_patch, working_tree_diff
from slime.agentic.swe.instances import load_instances

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

SOURCE = "inflection/__init__.py"


@pytest.fixture(scope="module")
def inst():
    return next(i for i in load_instances(DEFAULT_INSTANCES) if i.repo == "jpvanhal/inflection")


def evaluate(inst, patch, **kwargs):
    return asyncio.run(evaluate_patch(inst, patch, **kwargs))


def make_patch(inst, where, lines: list[str], *, with_gold: bool = False) -> str:
    """The diff of a scratch checkout where `lines` were appended to the source file (after the gold fix)."""
    tree = repos.checkout(inst, where)
    if with_gold:
        assert _apply(tree, inst.patch) is None
    with open(tree / SOURCE, "a") as f:
        f.write("".join(f"{line}\n" for line in lines))
    return working_tree_diff(tree, inst)


def test_gold_patch_resolves_and_empty_patch_does_not(inst):
    gold = evaluate(inst, inst.patch)
    assert gold.resolved, gold.reason
    assert gold.outcomes == {t: "passed" for t in inst.tests}
    empty = evaluate(inst, "")
    assert not empty.resolved and "empty patch" in empty.reason


def test_patches_touching_the_tests_are_refused(inst):
    edit_tests = inst.test_patch  # a test_patch edits the test file: as a submission it is refused
    result = evaluate(inst, inst.patch + edit_tests)
    assert not result.resolved and "test file 'test_inflection.py'" in result.reason
    delete = ("diff --git a/test_inflection.py b/test_inflection.py\ndeleted file mode 100644\n"
              "--- a/test_inflection.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")
    result = evaluate(inst, inst.patch + delete)
    assert not result.resolved and "test file" in result.reason
    conftest = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
                "@@ -0,0 +1 @@\n+collect_ignore = ['test_inflection.py']\n")
    result = evaluate(inst, inst.patch + conftest)
    assert not result.resolved and "conftest.py" in result.reason


def test_patches_writing_outside_the_repository_are_refused(inst):
    outside = ("diff --git a/../escape.py b/../escape.py\nnew file mode 100644\n--- /dev/null\n+++ b/../escape.py\n"
               "@@ -0,0 +1 @@\n+x = 1\n")
    result = evaluate(inst, inst.patch + outside)
    assert not result.resolved and "leaves the repository" in result.reason
    absolute = outside.replace("../escape.py", "/tmp/escape.py")
    result = evaluate(inst, inst.patch + absolute)
    assert not result.resolved and "absolute path" in result.reason
    link = ("diff --git a/pkg_link b/pkg_link\nnew file mode 120000\n--- /dev/null\n+++ b/pkg_link\n@@ -0,0 +1 @@\n"
            "+/etc\n\\ No newline at end of file\n")
    result = evaluate(inst, inst.patch + link)
    assert not result.resolved and "symbolic link" in result.reason


def test_a_patch_that_does_not_apply_and_a_wrong_fix(inst, tmp_path):
    stale = re.sub(r"\n-(?!--)", "\n-#", inst.patch, count=1)  # a removed line the base does not have
    result = evaluate(inst, stale)
    assert not result.resolved and "does not apply" in result.reason
    harmless = make_patch(inst, tmp_path / "t", ["", "# a comment does not fix anything"])
    result = evaluate(inst, harmless)
    assert not result.resolved
    assert all(result.outcomes[t] != "passed" for t in inst.FAIL_TO_PASS)
    assert all(result.outcomes[t] == "passed" for t in inst.PASS_TO_PASS)
    assert "did not pass" in result.reason


def test_a_listed_test_missing_from_the_report_is_not_a_pass(inst):
    ghost = dataclasses.replace(inst, PASS_TO_PASS=inst.PASS_TO_PASS + ("test_inflection.py::test_not_there",))
    result = evaluate(ghost, inst.patch)
    assert not result.resolved
    assert result.outcomes["test_inflection.py::test_not_there"] == "missing"


def test_tests_run_unprivileged_without_network_and_time_out(inst, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        # the gold fix plus an import-time probe: resolved only if the probe passes inside the sandbox
        probe = ["", "import os as _os, socket as _socket", "assert _os.getuid() != 0, 'tests run as root'",
                 "try:", f"    _socket.create_connection(('127.0.0.1', {port}), timeout=2).close()",
                 "    raise AssertionError('the host is reachable')", "except OSError:", "    pass"]
        result = evaluate(inst, make_patch(inst, tmp_path / "probe", probe, with_gold=True))
        assert result.resolved, result.reason + result.output_tail
    finally:
        listener.close()
    hang = make_patch(inst, tmp_path / "hang", ["", "import time as _time", "_time.sleep(60)"], with_gold=True)
    result = evaluate(inst, hang, timeout=3)
    assert not result.resolved and result.timed_out and "timed out" in result.reason


def test_working_tree_diff_is_the_agents_change_without_bytecode(inst, tmp_path):
    tree = repos.checkout(inst, tmp_path / "agent")
    assert working_tree_diff(tree, inst) == ""
    assert _apply(tree, inst.patch) is None
    (tree / "inflection" / "__pycache__").mkdir()
    (tree / "inflection" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0bytecode")
    (tree / "stray.pyc").write_bytes(b"\0")
    # what the agent's .git says is never run: a hook and an fsmonitor command that would leave a mark
    (tree / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch /tmp/swe-hook-ran\n")
    repos.git("config", "core.fsmonitor", f"touch {tmp_path}/fsmonitor-ran", cwd=tree)
    diff = working_tree_diff(tree, inst)
    assert diff == inst.patch
    assert not (tmp_path / "fsmonitor-ran").exists()
    assert evaluate(inst, diff).resolved
