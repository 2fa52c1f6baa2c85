"""The terminal-bench-layout task loader (slime.agentic.terminal.tasks): the shipped tasks load and cover every
category; a folder a user brings loads the same way (terminal-bench's own keys included); every kind of
malformed task is refused with an error that names the task and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from slime.agentic.terminal.tasks import (
    DEFAULT_TEST_TIMEOUT_S,
    TaskFormatError,
    find_task_dirs,
    load_task,
    load_tasks,
)

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "terminal-rl" / "tasks"
CATEGORIES = {"file-manipulation", "text-processing", "log-analysis", "csv-json", "archives", "permissions", "git", "fix-script"}


def make_task(root: Path, name: str = "my-task", yaml_text: str | None = "instruction: do it\n", *, tests: bool = True,
              run_tests: bool = True, setup: bool = False, solution: bool = False) -> Path:
    d = root / name
    d.mkdir(parents=True)
    if yaml_text is not None:
        (d / "task.yaml").write_text(yaml_text)
    if tests:
        (d / "tests").mkdir()
        (d / "tests" / "test_outputs.py").write_text("def test_x():\n    pass\n")
    if run_tests:
        (d / "run-tests.sh").write_text("#!/bin/bash\npytest $TEST_DIR/test_outputs.py\n")
    if setup:
        (d / "setup.sh").write_text("echo setup\n")
    if solution:
        (d / "solution.sh").write_text("echo solve\n")
    return d


# ------------------------------------------------------------------------------------------ shipped tasks


def test_shipped_tasks_load_and_cover_every_category():
    tasks = load_tasks(SHIPPED)
    assert len(tasks) >= 30
    assert {t.category for t in tasks} == CATEGORIES
    for t in tasks:
        assert t.instruction and "/app" in t.instruction, t.name
        assert t.setup_script is not None and t.solution_script is not None, t.name
        assert (t.tests_dir / "test_outputs.py").is_file(), t.name
        assert t.difficulty in ("easy", "medium", "hard"), t.name
        assert 0 < t.max_test_timeout_sec <= 120, t.name
        assert t.parser_name == "pytest"
    assert {t.difficulty for t in tasks} == {"easy", "medium", "hard"}
    assert [t.name for t in tasks] == sorted(t.name for t in tasks)


def test_shipped_scripts_are_shared_run_tests():
    # every run-tests.sh calls the interpreter the harness names and writes the JUnit report
    for t in load_tasks(SHIPPED):
        text = t.run_tests_script.read_text()
        assert '"${PYTHON:-python3}"' in text and "--junitxml" in text, t.name


# ------------------------------------------------------------------------------------------ a user's folder


def test_minimal_task_and_defaults(tmp_path):
    d = make_task(tmp_path)
    t = load_task(d)
    assert t.name == "my-task" and t.path == d.resolve() and t.instruction == "do it"
    assert t.max_test_timeout_sec == DEFAULT_TEST_TIMEOUT_S == 60.0
    assert t.setup_script is None and t.solution_script is None and t.dockerfile is None
    assert t.tags == () and t.category is None and t.author is None and t.parser_name == "pytest"
    assert t.to_record(tmp_path) == {"task": {"task_name": "my-task", "task_path": "my-task", "instruction": "do it", "data_source": "terminal_bench"}}


def test_terminal_bench_keys(tmp_path):
    yaml_text = """
instruction: |
  Fix the server.
  It crashes at start.
author_name: Ana
author_email: ana@example.com
difficulty: hard
category: system-administration
tags: [nginx, debugging]
parser_name: pytest
max_agent_timeout_sec: 360.0
max_test_timeout_sec: 45
run_tests_in_same_shell: false
expert_time_estimate_min: 20
"""
    d = make_task(tmp_path, yaml_text=yaml_text, setup=True, solution=True)
    (d / "Dockerfile").write_text("FROM python:3.12\n")
    t = load_task(d)
    assert t.instruction == "Fix the server.\nIt crashes at start."
    assert t.author == "Ana <ana@example.com>"
    assert (t.difficulty, t.category, t.tags, t.max_test_timeout_sec) == ("hard", "system-administration", ("nginx", "debugging"), 45.0)
    assert t.extra == {"expert_time_estimate_min": 20}
    assert t.max_agent_timeout_sec == 360.0 and t.run_tests_in_same_shell is False and t.format == "terminal-bench-1"
    assert t.setup_script == d / "setup.sh" and t.solution_script == d / "solution.sh"
    assert t.dockerfile == d / "Dockerfile" and t.environment_dir == d


def test_older_descriptions_form(tmp_path):
    d = make_task(tmp_path, yaml_text="descriptions:\n  - key: base\n    description: Count the lines.\n")
    assert load_task(d).instruction == "Count the lines."


def test_loader_root_nested_layout_and_filter(tmp_path):
    make_task(tmp_path / "core", "git-a")
    make_task(tmp_path / "core", "git-b")
    make_task(tmp_path / "extra", "log-a")
    (tmp_path / "notes").mkdir()  # a folder without task.yaml is not a task
    (tmp_path / ".hidden").mkdir()
    make_task(tmp_path / ".hidden", "secret-task")
    assert [t.name for t in load_tasks(tmp_path)] == ["git-a", "git-b", "log-a"]
    assert [t.name for t in load_tasks(tmp_path, "git-*")] == ["git-a", "git-b"]
    assert [t.name for t in load_tasks(tmp_path, "log-a, git-b")] == ["git-b", "log-a"]
    assert [t.name for t in load_tasks(tmp_path, ["log-a"])] == ["log-a"]
    with pytest.raises(TaskFormatError, match=r"no task matches 'nothing-\*'.*available: git-a, git-b, log-a"):
        load_tasks(tmp_path, "nothing-*")
    with pytest.raises(TaskFormatError, match=r"no task named 'gti-a'.*available: git-a, git-b, log-a"):
        load_tasks(tmp_path, "gti-a")
    # a task folder as the root, and an explicit list of folders
    assert [t.name for t in load_tasks(tmp_path / "extra" / "log-a")] == ["log-a"]
    assert [t.name for t in load_tasks([tmp_path / "core" / "git-b", tmp_path / "extra" / "log-a"])] == ["git-b", "log-a"]
    assert find_task_dirs(tmp_path) == [tmp_path / "core" / "git-a", tmp_path / "core" / "git-b", tmp_path / "extra" / "log-a"]


def test_tests_folder_inside_a_task_is_not_searched(tmp_path):
    d = make_task(tmp_path, "outer")
    (d / "tests" / "task.yaml").write_text("instruction: not a task\n")
    assert [t.name for t in load_tasks(tmp_path)] == ["outer"]


def test_duplicate_names(tmp_path):
    make_task(tmp_path / "a", "same")
    make_task(tmp_path / "b", "same")
    with pytest.raises(TaskFormatError, match="two tasks are named 'same'"):
        load_tasks(tmp_path)


def test_skip_invalid(tmp_path, caplog):
    make_task(tmp_path, "good")
    make_task(tmp_path, "bad", yaml_text="category: x\n")
    with pytest.raises(TaskFormatError, match="'bad'"):
        load_tasks(tmp_path)
    assert [t.name for t in load_tasks(tmp_path, skip_invalid=True)] == ["good"]
    assert "skipping a malformed task" in caplog.text and "bad" in caplog.text


# ------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "yaml_text, words",
    [
        ("category: x\n", "no 'instruction'"),
        ("instruction: ''\n", "'instruction' must be a non-empty string"),
        ("instruction: [a, b]\n", "'instruction' must be a non-empty string"),
        ("instruction: ok\nmax_test_timeout_sec: -5\n", "'max_test_timeout_sec' must be a positive number"),
        ("instruction: ok\nmax_test_timeout_sec: soon\n", "'max_test_timeout_sec' must be a positive number"),
        ("instruction: ok\nmax_test_timeout_sec: true\n", "'max_test_timeout_sec' must be a positive number"),
        ("instruction: ok\nmax_test_timeout_sec: .nan\n", "'max_test_timeout_sec' must be a positive number"),
        ("instruction: ok\ntags: {a: 1}\n", "'tags' must be a list of strings"),
        ("instruction: ok\ncategory: [a]\n", "'category' must be a string"),
        ("instruction: ok\n  bad: indent\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
        ("", "must be a mapping"),
    ],
)
def test_malformed_task_yaml(tmp_path, yaml_text, words):
    d = make_task(tmp_path, "broken-task", yaml_text=yaml_text)
    with pytest.raises(TaskFormatError) as e:
        load_task(d)
    assert "'broken-task'" in str(e.value) and words in str(e.value)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"yaml_text": None}, "no task.yaml"),
        ({"run_tests": False}, "no run-tests.sh"),
    ],
)
def test_missing_parts(tmp_path, kwargs, words):
    d = make_task(tmp_path, "incomplete", **kwargs)
    with pytest.raises(TaskFormatError) as e:
        load_task(d)
    assert "'incomplete'" in str(e.value) and words in str(e.value)


def test_tests_that_live_in_run_tests_alone(tmp_path):
    """Terminal-Bench 1.x tasks may keep their tests in run-tests.sh: no tests/ folder, or one without a test_*.py."""
    assert load_task(make_task(tmp_path, "inline", tests=False)).tests_dir is None
    d = make_task(tmp_path, "helpers-only")
    (d / "tests" / "test_outputs.py").rename(d / "tests" / "helpers.py")
    assert load_task(d).tests_dir == d / "tests"


def test_a_script_that_is_a_directory(tmp_path):
    d = make_task(tmp_path, "odd")
    (d / "setup.sh").mkdir()
    with pytest.raises(TaskFormatError, match="setup.sh exists but is not a regular file"):
        load_task(d)


def test_missing_folder_and_root(tmp_path):
    with pytest.raises(TaskFormatError, match="no such task folder"):
        load_task(tmp_path / "absent")
    with pytest.raises(TaskFormatError, match="no such directory"):
        load_tasks(tmp_path / "absent-root")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(TaskFormatError, match="not a directory"):
        load_task(tmp_path / "file.txt")
