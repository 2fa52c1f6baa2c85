"""Every shipped terminal task, in real bubblewrap sandboxes: a fresh workspace + solution.sh passes all of its
tests (reward 1), a fresh workspace where nothing was done passes none (reward -1). Plus the workspace's
evaluation: the tests are invisible and unwritable during the episode, anything found in the tests location is
discarded before evaluation, an agent's files in /app cannot hijack pytest, a test run past its timeout is
killed and scored -1, a failing setup.sh is reported, and nothing is left behind.

Skipped with the reason where this host cannot run the bwrap sandbox (no bwrap, not root, no namespaces)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from slime.agentic import sandbox as sb
from slime.agentic.sandbox import uid_processes
from slime.agentic.terminal import TaskSetupError, TaskWorkspace, load_task, load_tasks
from slime.agentic.terminal.check import check_tasks, summary

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

REPO = Path(__file__).resolve().parents[2]
TASKS_DIR = REPO / "terminal-rl" / "tasks"
TASKS = load_tasks(TASKS_DIR)
NAMES = [t.name for t in TASKS]


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    """Both runs of every task, two workspaces at a time (the machine has 2 cores)."""
    base = tmp_path_factory.mktemp("terminal-workspaces")
    start = time.monotonic()
    results = asyncio.run(check_tasks(TASKS, concurrency=2, base_dir=base))
    wall = time.monotonic() - start
    print("\n" + "\n".join(c.line() for c in results) + "\n" + summary(results, wall))
    assert os.listdir(base) == [], "a workspace directory was left behind"
    return {c.task.name: c for c in results}


@pytest.mark.parametrize("name", NAMES)
def test_solution_passes_every_test(checks, name):
    c = checks[name]
    assert not c.error, c.error
    o = c.solved
    assert o.success and o.reward == 1.0, f"{o.report.summary()} {o.reason}\n{o.output_tail}"
    assert o.total >= 3, "a task needs several meaningful tests"


@pytest.mark.parametrize("name", NAMES)
def test_doing_nothing_fails_every_test(checks, name):
    c = checks[name]
    assert not c.error, c.error
    o = c.unsolved
    assert o.reason == "" and o.total >= 3, o.reason  # the tests ran and failed, rather than not running
    assert o.passed == 0 and o.reward == -1.0, f"passes without doing anything: {o.outcomes}"


def test_timings_are_small(checks):
    for c in checks.values():
        assert c.solved_times["setup_s"] < 10 and c.solved_times["tests_s"] < 15, (c.task.name, c.solved_times)


# ---------------------------------------------------------------------------------------------- the workspace


def test_tests_hidden_unwritable_and_planted_files_discarded(tmp_path):
    task = load_task(TASKS_DIR / "count-error-lines")
    with TaskWorkspace.create_sync(task, base_dir=tmp_path) as ws:
        r = ws.run_sync("ls -A /tests | wc -l; touch /tests/conftest.py; echo rc=$?; cat /proc/self/status | grep ^Uid")
        assert r.stdout.splitlines()[:2] == ["0", "rc=1"], r.stdout
        assert "Permission denied" in r.stderr
        # whatever is found in the tests location is removed before evaluation: here planted from the host, as a
        # tests location the agent could write would have been (a conftest that passes everything, a fake report)
        (ws.tests_host / "conftest.py").write_text(
            "import pytest\n@pytest.hookimpl(tryfirst=True)\ndef pytest_runtest_call(item):\n    pytest.skip('hijacked')\n"
        )
        (ws.tests_host / ".results").mkdir()
        (ws.tests_host / ".results" / "junit.xml").write_text('<testsuite><testcase name="fake"/></testsuite>')
        # and files in /app that would hijack pytest if it ran from /app or read the agent's dotfiles
        ws.run_sync(
            "printf 'import sys\\nsys.exit(0)\\n' > pytest.py; "
            "printf 'def pytest_collection_modifyitems(items):\\n    items.clear()\\n' > conftest.py; "
            "printf '[pytest]\\naddopts = -p no:junitxml\\n' > pytest.ini; "
            "printf 'exit 0\\n' > .bash_profile; printf 'import os\\nos._exit(0)\\n' > sitecustomize.py"
        )
        outcome = ws.run_tests_sync()
        assert (outcome.passed, outcome.total, outcome.reward) == (0, 3, -1.0), outcome.as_dict()
        assert outcome.reason == "" and not outcome.timed_out
        assert sorted(outcome.outcomes) == [
            "test_outputs.py::test_answer_counts_error_level_only",
            "test_outputs.py::test_answer_file_exists",
            "test_outputs.py::test_answer_is_a_single_number",
        ]
        assert list(ws.tests_host.iterdir()) == [], "the tests location is emptied after evaluation"
        # the same workspace then solved: evaluation can be repeated
        assert ws.run_solution_sync().ok
        again = ws.run_tests_sync()
        assert again.success and again.reward == 1.0
        uid, root = ws.sandbox.uid, ws.root
    assert not root.exists()
    assert uid_processes([uid]) == []
    assert os.listdir(tmp_path) == []


def write_task(root: Path, name: str, *, yaml_text: str, tests: str, run_tests: str, setup: str | None = None) -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml_text)
    (d / "tests" / "test_outputs.py").write_text(tests)
    (d / "run-tests.sh").write_text(run_tests)
    if setup is not None:
        (d / "setup.sh").write_text(setup)
    return d


def test_user_task_with_plain_pytest_gets_partial_credit(tmp_path):
    # a terminal-bench style run-tests.sh that calls `pytest` without --junitxml: the workspace's PYTEST_ADDOPTS
    # still makes it write the report; 2 of 3 tests pass -> reward 2*2/3 - 1
    tasks_dir = tmp_path / "mine"
    write_task(
        tasks_dir, "hello-file",
        yaml_text="instruction: Write hello to /app/hello.txt\n",
        setup="echo hello > /app/hello.txt\n",
        run_tests="#!/bin/bash\ncd /app\npytest $TEST_DIR/test_outputs.py -rA\n",
        tests=(
            "from pathlib import Path\n"
            "def test_exists():\n    assert Path('/app/hello.txt').exists()\n"
            "def test_content():\n    assert Path('/app/hello.txt').read_text() == 'hello\\n'\n"
            "def test_other():\n    assert Path('/app/other.txt').exists()\n"
        ),
    )
    (task,) = load_tasks(tasks_dir)
    boxes = tmp_path / "boxes"
    boxes.mkdir()
    with TaskWorkspace.create_sync(task, base_dir=boxes) as ws:
        outcome = ws.run_tests_sync()
    assert (outcome.passed, outcome.total) == (2, 3), outcome.as_dict()
    assert outcome.reward == pytest.approx(1 / 3)
    assert outcome.outcomes["test_outputs.py::test_other"] == "failed"
    assert os.listdir(boxes) == []


def test_tests_past_their_timeout_are_killed_and_score_minus_one(tmp_path):
    d = write_task(
        tmp_path, "slow-tests",
        yaml_text="instruction: wait\nmax_test_timeout_sec: 2\n",
        run_tests='#!/bin/bash\nexec "${PYTHON:-python3}" -m pytest "$TEST_DIR/test_outputs.py" --junitxml="$JUNIT_XML"\n',
        tests="import time\ndef test_sleeps():\n    time.sleep(60)\n",
    )
    with TaskWorkspace.create_sync(d, base_dir=tmp_path) as ws:
        start = time.monotonic()
        outcome = ws.run_tests_sync()
        elapsed = time.monotonic() - start
        uid = ws.sandbox.uid
    assert outcome.timed_out and outcome.reward == -1.0 and outcome.total == 0
    assert "timed out after 2 s" in outcome.reason
    assert elapsed < 15
    assert uid_processes([uid]) == []


def test_failing_or_hanging_setup_is_reported_and_cleaned_up(tmp_path):
    tests = "def test_x():\n    pass\n"
    run_tests = "#!/bin/bash\nexit 0\n"
    bad = write_task(tmp_path / "t", "bad-setup", yaml_text="instruction: x\n", tests=tests, run_tests=run_tests,
                     setup="echo preparing; echo 'no such input' >&2; exit 3\n")
    hang = write_task(tmp_path / "t", "hang-setup", yaml_text="instruction: x\n", tests=tests, run_tests=run_tests,
                      setup="sleep 60\n")
    boxes = tmp_path / "boxes"
    boxes.mkdir()
    with pytest.raises(TaskSetupError, match=r"task 'bad-setup': setup.sh exited with 3") as e:
        TaskWorkspace.create_sync(bad, base_dir=boxes)
    assert "no such input" in str(e.value) and e.value.result.exit_code == 3
    with pytest.raises(TaskSetupError, match=r"task 'hang-setup': setup.sh timed out after 1 s"):
        TaskWorkspace.create_sync(hang, base_dir=boxes, setup_timeout_s=1)
    assert os.listdir(boxes) == []


def test_no_report_when_run_tests_does_not_run_pytest(tmp_path):
    d = write_task(tmp_path, "no-pytest", yaml_text="instruction: x\n", tests="def test_x():\n    pass\n",
                   run_tests="#!/bin/bash\necho 'tests skipped'\nexit 0\n")
    # the expected test ids are listed in the fresh workspace, before the episode: a task whose tests never report
    # through the sealed channel cannot be graded and is refused at setup, saying why
    boxes = tmp_path / "boxes"
    boxes.mkdir()
    with pytest.raises(TaskSetupError, match="did not report through the sealed channel") as err:
        TaskWorkspace.create_sync(d, base_dir=boxes)
    assert "tests skipped" in str(err.value)
    assert os.listdir(boxes) == []


def test_async_api_runs_workspaces_concurrently(tmp_path):
    tasks = [load_task(TASKS_DIR / n) for n in ("csv-column-sums", "extract-emails", "make-script-executable")]

    async def one(task):
        async with await TaskWorkspace.create(task, base_dir=tmp_path) as ws:
            await ws.run_solution()
            return (await ws.run_tests()).reward

    async def main():
        return await asyncio.gather(*(one(t) for t in tasks))

    assert asyncio.run(main()) == [1.0, 1.0, 1.0]
    assert os.listdir(tmp_path) == []
