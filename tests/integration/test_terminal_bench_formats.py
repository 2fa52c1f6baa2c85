"""A Terminal-Bench 1.x task whose environment is its Dockerfile (files copied, a WORKDIR, a RUN), with no setup.sh,
built and checked in the real bubblewrap sandbox: the reference solution passes, doing nothing does not, and the
files the Dockerfile copies and makes are there for both. A task whose Dockerfile installs packages is reported as
needing the Docker backend, not run in the wrong environment."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest

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


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def test_a_dockerfile_task_builds_in_the_sandbox_and_checks_out(tmp_path):
    _write(tmp_path / "tasks" / "sum-column", DOCKERFILE_TASK)
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
    task = load_task(_write(tmp_path / "tasks" / "apt-task", files))
    with pytest.raises(NeedsDockerBackend, match="needs the Docker backend: Dockerfile line 2: RUN apt-get"):
        asyncio.run(TaskWorkspace.create(task, base_dir=tmp_path))
    assert check_main(["--tasks-dir", str(tmp_path / "tasks")]) == 1
    assert "needs the Docker backend" in capsys.readouterr().out
