"""A task's docker-compose file read as Terminal-Bench's harness reads it: the agent's own service picked out, the
others' builds, environments, commands and start order, compose's variable substitution, and what is not reproduced
refused with the service and key named."""

from __future__ import annotations

import pytest

from helpers.file_trees import write_tree

from slime.agentic.terminal.compose import ComposeError, HealthCheck, interpolate, load_compose
from slime.agentic.terminal.tasks import load_task

TASK = {
    "task.yaml": "instruction: Read the secret the server holds.\n",
    "Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
    "run-tests.sh": "#!/bin/bash\npytest $TEST_DIR/test_outputs.py\n",
    "tests/test_outputs.py": "def test_x():\n    pass\n",
    "server/Dockerfile": "FROM python:3.12-slim\nCMD python3 -m http.server 8000\n",
    "server.env": "# the server's settings\nexport TOKEN='abc'\nMODE=test\n",
}

COMPOSE = """
    services:
      client:
        build:
          dockerfile: Dockerfile
        image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
        container_name: ${T_BENCH_TASK_DOCKER_CLIENT_CONTAINER_NAME}
        command: ["sh", "-c", "sleep infinity"]
        environment:
          - TEST_DIR=${T_BENCH_TEST_DIR}
          - SERVER_URL=http://server:8000
        volumes:
          - ${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}
      api:
        image: slime-terminal-base
        command: python3 -m http.server 9000 --bind 0.0.0.0
        depends_on:
          server:
            condition: service_healthy
      server:
        build:
          context: ./server
          args:
            LEVEL: ${LEVEL:-3}
        env_file: server.env
        environment:
          PORT: 8000
          DEBUG: true
          LOGS: ${T_BENCH_CONTAINER_LOGS_PATH}/server
        ports: ["8000:8000"]
        healthcheck:
          test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://localhost:8000')"]
          interval: 1s
          timeout: 1m30s
          retries: 5
"""


def task_with(tmp_path, compose: str, name: str = "secret-server", **more):
    return load_task(write_tree(tmp_path / name, {**TASK, "docker-compose.yaml": compose, **more}))


def test_the_agents_service_is_the_client_and_the_others_start_in_dependency_order(tmp_path):
    task = task_with(tmp_path, COMPOSE)
    project = load_compose(task)
    assert project.agent_service == "client"
    assert project.agent_environment == {"TEST_DIR": "/tests", "SERVER_URL": "http://server:8000"}
    assert [s.name for s in project.services] == ["server", "api"]  # api waits for server
    server, api = project.services
    assert server.build_context == task.path / "server" and server.dockerfile == task.path / "server" / "Dockerfile"
    assert server.build_args == {"LEVEL": "3"} and server.image is None
    assert server.environment == {"TOKEN": "abc", "MODE": "test", "PORT": "8000", "DEBUG": "true",
                                  "LOGS": "/logs/server"}
    assert server.healthcheck == HealthCheck(
        ("CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://localhost:8000')"), 1.0, 90.0, 5, 0.0)
    assert api.image == "slime-terminal-base" and api.build_context is None and api.depends_on == ("server",)
    assert api.command == ("python3", "-m", "http.server", "9000", "--bind", "0.0.0.0")  # split without a shell


def test_a_single_service_file_has_nothing_beside_the_agent(tmp_path):
    project = load_compose(task_with(tmp_path, "services:\n  box:\n    build: .\n    environment: [A=1]\n"))
    assert project.agent_service == "box" and project.services == () and project.agent_environment == {"A": "1"}
    assert load_compose(load_task(write_tree(tmp_path / "plain", TASK))) is None


def test_harbors_main_service_is_the_agents(tmp_path):
    files = {"instruction.md": "Do it.\n", "task.toml": "version = \"1.0\"\n",
             "environment/Dockerfile": "FROM ubuntu:24.04\n", "tests/test.sh": "#!/bin/bash\n",
             "environment/docker-compose.yaml": "services:\n  main:\n    build: .\n  db:\n    image: db-image\n"}
    task = load_task(write_tree(tmp_path / "harbor-task", files))
    project = load_compose(task)
    assert project.agent_service == "main" and [s.name for s in project.services] == ["db"]


def test_without_a_named_agent_service_the_one_building_the_tasks_dockerfile_is_it(tmp_path):
    compose = "services:\n  app:\n    build: .\n  server:\n    build: ./server\n"
    assert load_compose(task_with(tmp_path, compose)).agent_service == "app"
    with pytest.raises(ComposeError, match="which service is the agent's"):
        load_compose(task_with(tmp_path, "services:\n  a:\n    image: x\n  b:\n    image: y\n", name="two"))


@pytest.mark.parametrize("service, words", [
    ("    image: x\n    volumes: [data:/data]\n", "volumes is not reproduced"),
    ("    image: x\n    privileged: true\n    network_mode: host\n", "network_mode, privileged are not reproduced"),
    ("    build: ./nowhere\n", "build context .* is not a folder of the task"),
    ("    build:\n      context: ./server\n      dockerfile: Other\n", "no Other in its build context"),
    ("    restart: always\n", "neither build nor image"),
    ("    image: x\n    depends_on: [ghost]\n", "depends on ghost, which the file does not define"),
    ("    image: x\n    healthcheck:\n      test: [\"CMD\"]\n      interval: soon\n", "'soon' is not a duration"),
    ("    image: x\n    env_file: missing.env\n", "env_file missing.env is not a file of the task"),
    ("    image: ${IMAGE:?set IMAGE to the server's image}\n", "variable IMAGE is required: set IMAGE"),
])
def test_what_is_not_reproduced_is_refused_naming_the_service(tmp_path, service, words):
    compose = "services:\n  client:\n    build: .\n  other:\n" + service
    with pytest.raises(ComposeError, match=f"service other: .*{words}|{words}"):
        load_compose(task_with(tmp_path, compose))


def test_a_dependency_cycle_is_refused(tmp_path):
    compose = ("services:\n  client:\n    build: .\n  a:\n    image: x\n    depends_on: [b]\n"
               "  b:\n    image: y\n    depends_on: [a]\n")
    with pytest.raises(ComposeError, match="depends_on has a cycle: a -> b -> a"):
        load_compose(task_with(tmp_path, compose))


@pytest.mark.parametrize("text, expected", [
    ("$A-${A}", "1-1"),
    ("${UNSET}|$UNSET", "|"),
    ("${UNSET:-fallback}|${EMPTY:-fallback}|${EMPTY-kept}", "fallback|fallback|"),
    ("${A:+alt}|${UNSET:+alt}", "alt|"),
    ("$$A costs $$5", "$A costs $5"),
    ("${UNSET:-${A}}", "1"),
])
def test_compose_variable_substitution(text, expected):
    assert interpolate(text, {"A": "1", "EMPTY": ""}) == expected


def test_a_required_variable_that_is_empty_is_an_error():
    with pytest.raises(ComposeError, match="variable EMPTY is required"):
        interpolate("${EMPTY:?}", {"EMPTY": ""}, "here")
    assert interpolate("${EMPTY?}", {"EMPTY": ""}) == ""  # without the colon only unset is an error


def test_a_container_workspace_without_its_services_images_is_refused_before_starting_anything(tmp_path):
    from slime.agentic.terminal.workspace import TaskSetupError, TaskWorkspace

    task = task_with(tmp_path, COMPOSE)
    with pytest.raises(TaskSetupError, match="runs server, api beside the agent's container: build the task's images"):
        TaskWorkspace(task, base_dir=tmp_path, docker={"image": "slime-terminal-base"})
