"""A Terminal-Bench task's image built from its own Dockerfile on the private Docker daemon (the local Debian image
standing in for the base it names), reused while nothing changed, and the task checked in containers of it: the
reference solution passes and doing nothing does not. A base with no stand-in is refused with the reason.
Skipped only where Docker cannot run on this machine (tests/integration/docker_daemon.py)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from helpers.file_trees import write_tree

from slime.agentic.terminal import load_task
from slime.agentic.terminal.check import check_tasks
from slime.agentic.terminal.task_images import ImageBuildError, build_task_image

from docker_daemon import docker, docker_host  # noqa: F401 (docker_host: the module's fixture)

pytestmark = pytest.mark.timeout(1200)
REPO = Path(__file__).resolve().parents[2]

TASK = {
    "task.yaml": "instruction: Write the number of lines of /app/data.txt to /app/count.txt.\n"
                 "max_test_timeout_sec: 60\n",
    "Dockerfile": """
        FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
        WORKDIR /app
        COPY data.txt /app/
        RUN mkdir -p /app/made && wc -l < data.txt > /app/made/expected.txt
    """,
    "data.txt": "a\nb\nc\n",
    "solution.sh": "#!/bin/bash\nwc -l < /app/data.txt | tr -d ' ' > /app/count.txt\n",
    "run-tests.sh": '#!/bin/bash\n"${PYTHON:-python3}" -m pytest "$TEST_DIR/test_outputs.py" -rA\n',
    "tests/test_outputs.py": """
        from pathlib import Path

        def test_the_image_was_built_from_the_dockerfile():
            assert Path("/app/made/expected.txt").read_text().strip() == "3"

        def test_the_count():
            assert Path("/app/count.txt").read_text().strip() == "3"
    """,
}




def test_a_task_image_is_built_from_its_dockerfile_reused_and_checked(docker_host, tmp_path):
    task = load_task(write_tree(tmp_path / "count-lines", TASK))
    first = build_task_image(task, docker_host=docker_host)
    assert first.built and first.tag.startswith("slime-task/count-lines:") and first.workdir == "/app"
    assert first.stand_ins in ((), ("ghcr.io/laude-institute/t-bench/python-3-13:20250620",))
    again = build_task_image(task, docker_host=docker_host)
    assert again.tag == first.tag and not again.built  # unchanged: not built twice
    try:
        # the check's --build path: the task's own image (reused), as its root, in its WORKDIR
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert check.ok, check.line()
        assert (check.solved.passed, check.unsolved.passed, check.unsolved.total) == (2, 1, 2)
        # and any image as a plain --image, as the image's non-root sandbox user
        [plain] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"image": first.tag, "docker_host": docker_host}))
        assert plain.ok, plain.line()
        (task.path / "data.txt").write_text("a\nb\n")  # a changed build context is another image
        changed = build_task_image(task, docker_host=docker_host)
        assert changed.built and changed.tag != first.tag
        docker(docker_host, "rmi", changed.tag)
    finally:
        docker(docker_host, "rmi", first.tag)


def test_a_base_image_without_a_stand_in_is_refused(docker_host, tmp_path):
    files = dict(TASK)
    files["Dockerfile"] = "FROM node:20\nWORKDIR /app\n"
    task = load_task(write_tree(tmp_path / "node-task", files))
    with pytest.raises(ImageBuildError, match="base image node:20 cannot be pulled here and has no local stand-in"):
        build_task_image(task, docker_host=docker_host)


# Terminal-Bench 1.x's standard run-tests.sh: it installs curl and uv and adds pytest from the network
TB_RUN_TESTS = """
    #!/bin/bash
    apt-get update
    apt-get install -y curl
    curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh
    source $HOME/.local/bin/env
    if [ "$PWD" = "/" ]; then
        echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile before running this script."
        exit 1
    fi
    uv init
    uv add pytest==8.4.1
    uv run pytest $TEST_DIR/test_outputs.py -rA
"""


def test_terminal_benchs_own_run_tests_script_runs_offline(docker_host, tmp_path):
    """The container has no network; the image's offline kit answers uv's installer and pytest's pin."""
    task = load_task(write_tree(tmp_path / "count-lines-tb", {**TASK, "run-tests.sh": TB_RUN_TESTS}))
    image = build_task_image(task, docker_host=docker_host)
    try:
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert check.ok, check.line() + "\n" + (check.solved.output_tail if check.solved else check.error)
        assert (check.solved.passed, check.solved.total, check.unsolved.passed) == (2, 2, 1)
        # a script that wants something else from the network is told which URL it cannot have
        out = docker(docker_host, "run", "--rm", "--network", "none", image.tag, "bash", "-c",
                     "curl -sS https://example.com/data.csv 2>&1; true")
        assert "https://example.com/data.csv is not available offline" in out
    finally:
        docker(docker_host, "rmi", image.tag)


HARBOR_TASK = {
    "instruction.md": "Write the number of lines of /app/data.txt to /app/count.txt.\n",
    "task.toml": "[verifier]\ntimeout_sec = 120.0\n\n[agent]\ntimeout_sec = 300.0\n",
    "environment/Dockerfile": """
        FROM python:3.12-slim
        WORKDIR /app
        COPY data.txt /app/
        RUN pip install --no-cache-dir six==1.16.0 && python -c "import six, sys; assert sys.version_info[:2] == (3, 12)"
    """,
    "environment/data.txt": "a\nb\nc\n",
    "solution/solve.sh": "#!/bin/bash\nwc -l < /app/data.txt | tr -d ' ' > /app/count.txt\n",
    "tests/test.sh": """
        #!/bin/bash
        set +e
        mkdir -p /logs/verifier
        uvx --python 3.12 --with pytest==8.3.3 pytest /tests/test_outputs.py -rA
        status=$?
        if [ $status -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
        exit $status
    """,
    "tests/test_outputs.py": """
        from pathlib import Path

        def test_the_count():
            assert Path("/app/count.txt").read_text().strip() == "3"
    """,
}


def test_a_harbor_task_on_python_3_12_builds_on_the_ubuntu_stand_in_and_verifies_offline(docker_host, tmp_path):
    """Harbor's verifier (`uvx --python 3.12 --with pytest==8.3.3 pytest`) in a container without network: the
    Ubuntu 24.04 stand-in brings Python 3.12 (with pip, as python:3.12-slim), the offline kit brings uv and pytest."""
    import subprocess

    built = subprocess.run(["bash", str(REPO / "scripts" / "setup_docker.sh"), "ubuntu"], capture_output=True,
                           text=True, timeout=900, env={**os.environ, "DOCKER_HOST": docker_host})
    if built.returncode == 2:  # the script's status for "cannot be done here" (no Ubuntu archive reachable)
        pytest.skip(f"no Ubuntu 24.04 stand-in here: {built.stderr.strip()[-500:]}")
    assert built.returncode == 0, built.stderr[-3000:]
    task = load_task(write_tree(tmp_path / "count-lines-harbor", HARBOR_TASK))
    image = build_task_image(task, docker_host=docker_host)
    try:
        assert image.stand_ins in ((), ("python:3.12-slim",)) and image.workdir == "/app"
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert check.ok, check.line() + "\n" + (check.solved.output_tail if check.solved else check.error)
        assert (check.solved.passed, check.solved.total, check.unsolved.passed) == (1, 1, 0)
    finally:
        docker(docker_host, "rmi", image.tag)


def test_a_run_tests_script_that_never_runs_pytest_is_a_task_error_not_a_harness_crash(docker_host, tmp_path):
    """The report channel's other end closes unread when the script exits without pytest: the supervisor reads that
    as the end of the report (nothing was reported), and the check names the task's problem."""
    task = load_task(write_tree(tmp_path / "no-pytest", {**TASK, "run-tests.sh": "#!/bin/bash\necho no tests here\n"}))
    image = build_task_image(task, docker_host=docker_host)
    try:
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert not check.ok and "pytest did not report through the sealed channel" in check.error, check.error
    finally:
        docker(docker_host, "rmi", image.tag)
