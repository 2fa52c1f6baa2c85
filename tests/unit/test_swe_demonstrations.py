"""swe-rl/swe_demonstrations.py: the scripted engineer's steps from a gold patch and the base tree (the run
through the real service is tests/integration/test_swe_demonstrations_service.py)."""
import subprocess
import sys

import pytest

from generate_with_swe_remote import parse_bash_block
from swe_demonstrations import (demonstration_responses, edit_command, enclosing_function,
                                              issue_function, parse_hunks, unique_piece)
from slime.agentic.swe.instances import SweInstance

SOURCE = """\
def helper(values):
    total = 0
    for v in values:
        total += v
    return total


def mean(values):
    total = 0
    for v in values:
        total += v
    return total / (len(values) + 1)
"""
PATCH = """\
diff --git a/pkg/stats.py b/pkg/stats.py
index 1111111..2222222 100644
--- a/pkg/stats.py
+++ b/pkg/stats.py
@@ -9,4 +9,4 @@ def mean(values):
     total = 0
     for v in values:
         total += v
-    return total / (len(values) + 1)
+    return total / len(values)
"""


def _instance(patch=PATCH, statement="`stats.average([2, 4])` gives 2.0, not 3.0"):
    return SweInstance(instance_id="o__pkg-1", repo="o/pkg", base_commit="0" * 40, problem_statement=statement,
                       FAIL_TO_PASS=("pkg/tests/test_stats.py::test_mean",), PASS_TO_PASS=(), test_patch="",
                       patch=patch)


def test_hunks_and_the_smallest_unique_piece_around_a_change():
    (hunk,) = parse_hunks(PATCH)
    assert hunk.path == "pkg/stats.py" and hunk.old_start == 9 and (hunk.before, hunk.after) == (3, 0)
    old, new = unique_piece(SOURCE, hunk)
    assert old == "    return total / (len(values) + 1)\n" and new == "    return total / len(values)\n"


def test_a_piece_that_is_not_unique_grows_by_context_lines():
    patch = PATCH.replace("-    return total / (len(values) + 1)\n+    return total / len(values)\n",
                          "-        total += v\n+        total += 2 * v\n     return total / (len(values) + 1)\n")
    patch = patch.replace("@@ -9,4 +9,4 @@", "@@ -9,4 +9,4 @@")
    (hunk,) = parse_hunks(patch)
    old, new = unique_piece(SOURCE, hunk)
    assert SOURCE.count(old) == 1 and "total += v" in old and "total += 2 * v" in new
    assert SOURCE.replace(old, new).count("2 * v") == 1


def test_the_edit_script_changes_the_file_once_and_fails_loudly_otherwise(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "stats.py").write_text(SOURCE)
    (hunk,) = parse_hunks(PATCH)
    script = edit_command([("pkg/stats.py", *unique_piece(SOURCE, hunk))])
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
    assert (tmp_path / "pkg" / "stats.py").read_text() == SOURCE.replace("(len(values) + 1)", "len(values)")
    again = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert again.returncode != 0 and "not there exactly once" in again.stderr


def test_the_function_of_the_change_and_the_one_the_issue_names():
    assert enclosing_function(SOURCE.splitlines(), 12) == ("mean", 8)
    with pytest.raises(ValueError):
        enclosing_function(["x = 1"], 1)
    assert issue_function("Calling `stats.mean` fails", {"mean", "helper"}) == "mean"
    assert issue_function("```python\nprint(helper([1]))\n```", {"mean", "helper"}) == "helper"
    assert issue_function("mean is wrong (no code)", {"mean"}) is None


def test_the_responses_find_read_edit_test_and_submit():
    responses = demonstration_responses(_instance(statement="`pkg.helper([1])` is fine but mean is not"),
                                        lambda path: SOURCE, {"helper", "mean"})
    commands = [parse_bash_block(r) for r in responses]
    assert all(commands)
    # the issue names `helper`, the bug is in `mean`: both are looked up
    assert commands[0] == 'grep -rn "def helper(" --include="*.py" pkg'
    assert commands[1] == 'grep -rn "def mean(" --include="*.py" pkg'
    assert commands[2] == "sed -n '8,12p' pkg/stats.py"  # from the def to the file's end
    assert commands[3].startswith("python3 - <<'EOF'")
    assert commands[4] == "python -m pytest -q pkg/tests/test_stats.py 2>&1 | tail -n 3"
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in commands[5]
    # the gold patch itself is never typed
    assert "diff --git" not in "".join(responses)
