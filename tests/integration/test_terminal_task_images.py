"""A Terminal-Bench task's image built from its own Dockerfile on the private Docker daemon (the local Debian image
standing in for the base it names), reused while nothing changed, and the task checked in containers of it: the
reference solution passes and doing nothing does not. A base with no stand-in is refused with the reason.
Skipped only where Docker cannot run on this machine (tests/integration/docker_daemon.py)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest

from helpers.file_trees import write_tree

from slime.agentic.sandbox import SandboxLimits
from slime.agentic.terminal import load_task
from slime.agentic.terminal.check import check_tasks
from slime.agentic.terminal.task_images import ImageBuildError, build_task_image
from slime.agentic.terminal.workspace import TaskWorkspace

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
    # as Harbor's tasks do: solve.sh uses the other files of solution/, which Harbor puts at /solution
    "solution/solve.sh": "#!/bin/bash\npython3 /solution/count.py > /app/count.txt\n",
    "solution/count.py": "print(len(open('/app/data.txt').read().splitlines()))\n",
    # Harbor's verifier template: the CTRF report under /logs/verifier, reward.txt from pytest's status, exit 0
    "tests/test.sh": """
        #!/bin/bash
        set +e
        mkdir -p /logs/verifier
        uvx --python 3.12 --with pytest==8.3.3 --with pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json \\
            /tests/test_outputs.py -rA
        if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
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
        # doing nothing: its one test failed (a verifier that exits 0 anyway is judged by its report alone)
        assert (check.solved.passed, check.solved.total, check.unsolved.passed, check.unsolved.total) == (1, 1, 0, 1), \
            check.unsolved.reason
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


CTRF_TASK = {
    **TASK,
    # Harbor's verifier template: uvx with pytest and the CTRF report plugin, the report under /logs/verifier
    "run-tests.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                    "uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json "
                    "$TEST_DIR/test_outputs.py -rA\n",
}


def test_the_provider_builds_a_tasks_image_and_its_verifier_loads_its_report_plugin(docker_host, tmp_path):
    """`build_images=true`: the terminal provider runs a task with a Dockerfile in the image built from it, as root in
    its WORKDIR; the verifier's `pytest --ctrf` finds pytest-json-ctrf (the offline kit's wheel, loaded as the image's
    plugins are), whose reporter registers while pytest configures itself and is not taken for tampering."""
    from slime.agentic.env_service.providers import LeaseContext
    from slime.agentic.terminal.provider import TerminalProvider

    tasks = tmp_path / "tasks"
    write_tree(tasks / "count-lines-ctrf", CTRF_TASK)
    provider = TerminalProvider(tasks_dir=tasks, backend="docker", docker_host=docker_host, build_images=True)

    async def episode(solve: bool):
        env, first = await provider.reset(LeaseContext(f"ctrf-{solve}", "count-lines-ctrf", str(tmp_path)),
                                          {"task_meta": {"task_name": "count-lines-ctrf"}})
        try:
            where = await env.workspace.run("pwd; id -un")
            if solve:
                await env.workspace.run_solution()
            return where.stdout.split(), await provider.evaluate(env, {})
        finally:
            await provider.close(env)

    tag = None
    try:
        (where, solved), (_, nothing) = asyncio.run(episode(True)), asyncio.run(episode(False))
        tag = provider._built[str(tasks / "count-lines-ctrf")].result().tag
        assert where == ["/app", "root"]
        assert (solved["passed"], solved["total"], solved["reward"]) == (2, 2, 1.0), (solved["reason"], solved.get("output_tail"))
        assert nothing["passed"] == 1 and nothing["reward"] < 1.0, nothing  # the image's own file is there
    finally:
        if tag:
            docker(docker_host, "rmi", tag)


def test_build_images_needs_the_docker_backend():
    from slime.agentic.terminal.provider import TerminalProvider

    with pytest.raises(ValueError, match="needs backend=docker"):
        TerminalProvider(build_images="true")


def test_keeping_the_agents_processes_needs_a_container_and_a_root_agent(tmp_path):
    from slime.agentic.terminal.workspace import TaskWorkspace

    task = load_task(write_tree(tmp_path / "count-lines", TASK))
    with pytest.raises(ValueError, match="needs the Docker backend"):
        TaskWorkspace(task, base_dir=tmp_path, keep_agent_processes=True)
    with pytest.raises(ValueError, match="root agent only"):  # its process could ptrace the tests' pytest
        TaskWorkspace(task, base_dir=tmp_path, keep_agent_processes=True, docker={"user": "1000:1000"})
    assert not list(tmp_path.glob("slime-terminal-*"))  # refused before anything was made


SERVER_TASK = {
    "task.yaml": "instruction: Serve /app/www on port 8000 and leave the server running.\nmax_test_timeout_sec: 60\n",
    "Dockerfile": """
        FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
        WORKDIR /app
        RUN mkdir -p /app/www && echo hello > /app/www/index.html
    """,
    # started in the background, as an agent would: Terminal-Bench's tests find it still running
    "solution.sh": "#!/bin/bash\ncd /app/www && nohup python3 -m http.server 8000 > /tmp/server.log 2>&1 &\n"
                   "for i in $(seq 50); do python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:8000\")'"
                   " 2>/dev/null && break; sleep 0.1; done\n",
    "run-tests.sh": '#!/bin/bash\n"${PYTHON:-python3}" -m pytest "$TEST_DIR/test_outputs.py" -rA\n',
    "tests/test_outputs.py": """
        import urllib.request

        def test_the_server_answers():
            assert urllib.request.urlopen("http://127.0.0.1:8000/index.html", timeout=5).read() == b"hello\\n"
    """,
}


def test_a_server_the_solution_started_is_still_running_during_the_tests(docker_host, tmp_path):
    """Terminal-Bench keeps the agent's processes during the tests: in a task's own image the check runs the
    solution in a shell session left open, and the tests run beside it (then everything of the container ends)."""
    task = load_task(write_tree(tmp_path / "serve-www", SERVER_TASK))
    image = build_task_image(task, docker_host=docker_host)
    try:
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert check.ok, check.line() + "\n" + (check.solved.output_tail if check.solved else check.error)
        assert (check.solved.passed, check.unsolved.passed) == (1, 0)
    finally:
        docker(docker_host, "rmi", image.tag)


COMPOSE_TASK = {
    "task.yaml": "instruction: Fetch the secret and the greeting the server holds into /app/answer.txt.\n"
                 "max_test_timeout_sec: 60\n",
    "Dockerfile": "FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620\nWORKDIR /app\n",
    "docker-compose.yaml": """
        services:
          client:
            build:
              dockerfile: Dockerfile
            image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
            command: ["sh", "-c", "sleep infinity"]
            environment:
              - TEST_DIR=${T_BENCH_TEST_DIR}
              - SERVER_URL=http://server:8000
          server:
            build: ./server
            environment:
              GREETING: ${GREETING:-hello}
            command: ["sh", "-c", "echo $$GREETING > /srv/greeting.txt && exec python3 -m http.server 8000"]
            healthcheck:
              test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://localhost:8000/')"]
              interval: 1s
              retries: 60
    """,
    "server/Dockerfile": "FROM debian:bookworm\nWORKDIR /srv\nCOPY secret.txt /srv/secret.txt\n",
    "server/secret.txt": "s3cret\n",
    "solution.sh": """
        #!/bin/bash
        python3 - <<'PY'
        import os, urllib.request
        url = os.environ["SERVER_URL"]
        text = "".join(urllib.request.urlopen(f"{url}/{name}").read().decode() for name in ("secret.txt",
                                                                                           "greeting.txt"))
        open("/app/answer.txt", "w").write(text)
        PY
    """,
    "run-tests.sh": '#!/bin/bash\n"${PYTHON:-python3}" -m pytest "$TEST_DIR/test_outputs.py" -rA\n',
    "tests/test_outputs.py": """
        import urllib.request
        from pathlib import Path

        def test_the_answer():
            assert Path("/app/answer.txt").read_text() == "s3cret\\nhello\\n"

        def test_the_server_still_serves_during_the_tests():
            assert urllib.request.urlopen("http://server:8000/secret.txt").read() == b"s3cret\\n"
    """,
}


def _host_addresses() -> list[str]:
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=False).stdout
    return [line.split()[3].split("/")[0] for line in out.splitlines() if len(line.split()) > 3]


def test_a_compose_task_runs_its_services_on_a_private_network(docker_host, tmp_path):
    """The check with --build: the task's server built from its own folder runs beside the agent's container, which
    reaches it by name (and the tests do too); doing nothing fails. In a workspace of that task nothing of the host
    answers, a listener of the host on every address included, the service's disk is capped at the workspace's budget,
    and closing it removes the services and the network."""
    task = load_task(write_tree(tmp_path / "fetch-secret", COMPOSE_TASK))
    built = build_task_image(task, docker_host=docker_host)
    assert [name for name, _ in built.services] == ["server"]
    images = [built.tag, *(image for _, image in built.services)]
    try:
        [check] = asyncio.run(check_tasks([task], concurrency=1, base_dir=tmp_path,
                                          docker={"build": True, "docker_host": docker_host}))
        assert check.ok, check.line() + "\n" + (check.solved.output_tail if check.solved else check.error)
        assert (check.solved.passed, check.solved.total, check.unsolved.passed) == (2, 2, 1)

        listener = socket.socket()
        listener.bind(("0.0.0.0", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = ("import socket, sys\nfor host in sys.argv[2:]:\n    s = socket.socket(); s.settimeout(2)\n"
                 "    try:\n        s.connect((host, int(sys.argv[1]))); print('reached', host)\n"
                 "    except OSError as e:\n        print('no', host, e)\n")
        limits = SandboxLimits(disk_budget_bytes=16 << 20)
        with listener, TaskWorkspace.create_sync(task, base_dir=tmp_path, services=built.services, limits=limits,
                                                 docker={"image": built.tag, "user": "root",
                                                         "docker_host": docker_host}) as ws:
            network = ws.services.network
            # the service's writable layer has the workspace's disk budget (the agent could make it write)
            server = ws.services.container_name(ws.services.project.services[0])
            full = docker(docker_host, "exec", server, "sh", "-c", "head -c 64M /dev/zero > /srv/big; echo rc=$?; "
                          "stat -c %s /srv/big")
            assert full.split()[0] == "rc=1" and int(full.split()[1]) <= 16 << 20, full
            assert docker(docker_host, "network", "inspect", network, "--format", "{{.Internal}}").strip() == "true"
            result = ws.run_sync(["python3", "-c", probe, str(port), *_host_addresses()])
            lines = result.stdout.splitlines()
            assert len(lines) == len(_host_addresses()) and all(line.startswith("no ") for line in lines), result
            served = ws.run_sync(["python3", "-c", "import urllib.request as u; "
                                  "print(u.urlopen('http://server:8000/greeting.txt').read().decode())"])
            assert served.stdout.strip() == "hello", served
            assert ws.run_sync(["sh", "-c", "echo $SERVER_URL"]).stdout.strip() == "http://server:8000"
        assert not docker(docker_host, "network", "ls", "-q", "--filter", f"name={network}").strip()
        assert not docker(docker_host, "ps", "-aq", "--filter", f"name={network}").strip()
    finally:
        for image in images:
            docker(docker_host, "rmi", image, check=False)
