"""A Terminal-Bench 1.x task whose environment is its Dockerfile (files copied, a WORKDIR, a RUN), with no setup.sh,
built and checked in the real bubblewrap sandbox: the reference solution passes, doing nothing does not, and the
files the Dockerfile copies and makes are there for both. A task whose Dockerfile installs packages is reported as
needing the Docker backend, not run in the wrong environment."""

from __future__ import annotations

import asyncio
import os
import textwrap

import pytest

from helpers.file_trees import write_tree

from slime.agentic import sandbox as sb
from slime.agentic.terminal import TaskWorkspace, load_task, load_tasks
from slime.agentic.terminal.check import check_tasks, main as check_main
from slime.agentic.terminal.workspace import NeedsDockerBackend

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

DOCKERFILE_TASK = {
    "task.yaml": """
        instruction: |-
          /app/data.csv has two columns. Write the sum of column b to /app/sum.txt.
        parser_name: pytest
        max_agent_timeout_sec: 120.0
        max_test_timeout_sec: 60.0
        run_tests_in_same_shell: false
    """,
    "Dockerfile": """
        FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
        WORKDIR /app
        COPY data.csv /app/
        COPY inputs/ ./inputs/
        ENV SEP=,
        RUN mkdir -p prepared && cut -d "$SEP" -f 2 data.csv | tail -n +2 > prepared/column-b.txt
    """,
    "data.csv": "a,b\n1,2\n3,4\n",
    "inputs/notes.txt": "numbers only\n",
    "solution.sh": "#!/bin/bash\nawk '{s += $1} END {print s}' prepared/column-b.txt > sum.txt\n",
    "run-tests.sh": """
        #!/bin/bash
        "${PYTHON:-python3}" -m pytest "$TEST_DIR/test_outputs.py" -rA
    """,
    "tests/test_outputs.py": """
        from pathlib import Path

        def test_the_dockerfile_built_the_environment():
            assert Path("/app/inputs/notes.txt").read_text() == "numbers only\\n"
            assert Path("/app/prepared/column-b.txt").read_text().split() == ["2", "4"]

        def test_the_sum():
            assert Path("/app/sum.txt").read_text().strip() == "6"
    """,
}




def test_a_dockerfile_task_builds_in_the_sandbox_and_checks_out(tmp_path):
    write_tree(tmp_path / "tasks" / "sum-column", DOCKERFILE_TASK)
    tasks = load_tasks(tmp_path / "tasks")
    base = tmp_path / "ws"
    base.mkdir()
    [check] = asyncio.run(check_tasks(tasks, concurrency=1, base_dir=base))
    assert check.ok, check.line()
    assert (check.solved.passed, check.solved.total) == (2, 2)
    assert (check.unsolved.passed, check.unsolved.total) == (1, 2)  # the environment is there, the work is not
    # and the check names the task whose untouched workspace already passes a test
    assert "doing nothing passes 1/2 tests" in check.warning and "WARNING" in check.line()
    assert os.listdir(base) == []


def test_a_dockerfile_that_installs_packages_needs_the_docker_backend(tmp_path, capsys):
    files = dict(DOCKERFILE_TASK)
    files["Dockerfile"] = "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n"
    task = load_task(write_tree(tmp_path / "tasks" / "apt-task", files))
    with pytest.raises(NeedsDockerBackend, match="needs the Docker backend: Dockerfile line 2: RUN apt-get"):
        asyncio.run(TaskWorkspace.create(task, base_dir=tmp_path))
    assert check_main(["--tasks-dir", str(tmp_path / "tasks")]) == 1
    assert "needs the Docker backend" in capsys.readouterr().out


def test_the_importer_validates_runs_and_reports_a_mixed_dataset(tmp_path):
    from slime.agentic.terminal.import_tasks import main as import_main

    src = tmp_path / "downloaded"
    write_tree(src / "tb1" / "sum-column", DOCKERFILE_TASK)
    apt = dict(DOCKERFILE_TASK)
    apt["Dockerfile"] = "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n"
    write_tree(src / "tb1" / "apt-task", apt)
    write_tree(src / "tb1" / "broken", {"task.yaml": "instruction: x\nparser_name: swebench\n", "run-tests.sh": "true\n"})
    write_tree(src / "tb2" / "no-solution", {"instruction.md": "Do it.\n", "task.toml": "[verifier]\ntimeout_sec = 30\n",
                                         "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
                                         "tests/test.sh": "#!/bin/bash\ntrue\n"})
    dest = tmp_path / "imported"
    assert import_main([str(src), str(dest), "--backend", "bwrap", "--concurrency", "1"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["IMPORT_REPORT.md", "import_report.json", "sum-column"]
    report = {t["task"]: t for t in __import__("json").loads((dest / "import_report.json").read_text())["tasks"]}
    assert report["sum-column"]["ok"] and report["sum-column"]["backend"] == "bwrap"
    assert report["sum-column"]["reference"]["passed"] == 2 and report["sum-column"]["nothing"]["passed"] == 1
    assert "needs the Docker backend: Dockerfile line 2: RUN apt-get" in report["apt-task"]["problem"]
    assert "parser_name 'swebench' is not supported" in report["broken"]["problem"]
    assert report["no-solution"]["format"] == "harbor" and "no reference solution" in report["no-solution"]["problem"]
    markdown = (dest / "IMPORT_REPORT.md").read_text()
    assert "4 task folders; 3 load; 1 ran their reference solution; 1 checked out" in markdown
    # nothing importable: exit 1; nothing there at all: exit 2
    assert import_main([str(src / "tb1" / "apt-task"), str(tmp_path / "none"), "--backend", "bwrap"]) == 1
    (tmp_path / "empty").mkdir()
    assert import_main([str(tmp_path / "empty"), str(tmp_path / "none2")]) == 2


def test_a_solution_yaml_is_typed_into_a_shell(tmp_path):
    """Terminal-Bench 1.x's solution.yaml: a blocking command, then one that waits for input, then that input."""
    files = {k: v for k, v in DOCKERFILE_TASK.items() if k != "solution.sh"}
    files["solution.yaml"] = """
        - command: "awk '{s += $1} END {print s}' prepared/column-b.txt > sum.txt"
          block: true
        - command: "read answer && echo \\"$answer\\" > /app/answer.txt"
          block: false
        - command: "42"
          min_timeout_sec: 0.5
    """
    files["tests/test_outputs.py"] = textwrap.dedent(files["tests/test_outputs.py"]) + (
        "\n\ndef test_the_typed_answer():\n    assert Path('/app/answer.txt').read_text() == '42\\n'\n")
    write_tree(tmp_path / "tasks" / "typed", files)
    tasks = load_tasks(tmp_path / "tasks")
    assert len(tasks[0].solution_commands) == 3 and tasks[0].solution_script is None
    base = tmp_path / "ws"
    base.mkdir()
    [check] = asyncio.run(check_tasks(tasks, concurrency=1, base_dir=base))
    assert check.ok, check.line()
    assert (check.solved.passed, check.solved.total) == (3, 3)
