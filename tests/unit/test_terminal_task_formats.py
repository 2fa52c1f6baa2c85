"""Terminal-Bench tasks as they ship: a 1.x task with a Dockerfile, compose file and solution.yaml, a 2.0 / Harbor
task, and what the sandbox backend can build from a Dockerfile (or why it needs Docker). Fixtures are written here,
in each format's layout; nothing is skipped silently: an empty tasks folder is an error."""

from __future__ import annotations

import textwrap

import pytest

from helpers.file_trees import write_tree

from slime.agentic.terminal.check import main as check_main
from slime.agentic.terminal.dockerfile import NeedsDocker, command_names, parse_dockerfile, sandbox_build
from slime.agentic.terminal.tasks import HARBOR, TB1, SolutionCommand, TaskFormatError, load_task, load_tasks




TB1_TASK = {
    "task.yaml": """
        instruction: |-
          Summarise /app/data.csv into /app/summary.txt.
        author_name: A. Author
        author_email: a@example.com
        difficulty: easy
        category: data-processing
        tags: [csv]
        parser_name: pytest
        max_agent_timeout_sec: 900.0
        max_test_timeout_sec: 180.0
        run_tests_in_same_shell: false
        disable_asciinema: false
        estimated_duration_sec:
        expert_time_estimate_min: 5
        junior_time_estimate_min: 15
    """,
    "Dockerfile": """
        FROM ghcr.io/laude-institute/t-bench/python-3-13:20250620
        # the task's files
        WORKDIR /app
        COPY data.csv /app/
        COPY inputs/ ./inputs/
        ENV MODE=fast \\
            LEVEL=2
        RUN mkdir -p out && \\
            cp data.csv out/copy.csv
    """,
    "data.csv": "a,b\n1,2\n",
    "inputs/x.txt": "x\n",
    "docker-compose.yaml": """
        services:
          client:
            build:
              dockerfile: Dockerfile
            image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}
            command: ["sh", "-c", "sleep infinity"]
            environment:
              - TEST_DIR=${T_BENCH_TEST_DIR}
    """,
    "solution.yaml": """
        - command: "python3 -c 'print(1)' > summary.txt"
          min_timeout_sec: 0.1
          block: true
        - command: "ls"
          append_enter: false
    """,
    "run-tests.sh": """
        #!/bin/bash
        uv run pytest $TEST_DIR/test_outputs.py -rA
    """,
    "tests/test_outputs.py": "def test_summary():\n    assert open('/app/summary.txt').read()\n",
}

HARBOR_TASK = {
    "instruction.md": "Find the shortest path in /workspace/map.txt.\n",
    "task.toml": """
        version = "1.0"

        [metadata]
        author_name = "Terminal Bench"
        author_email = "bench@example.com"
        difficulty = "medium"
        category = "software-engineering"
        tags = ["coding"]
        expert_time_estimate_min = 30.0

        [verifier]
        timeout_sec = 240.0

        [agent]
        timeout_sec = 900.0

        [environment]
        build_timeout_sec = 600.0
        cpus = 1
        memory_mb = 2048
        storage_mb = 10240
        gpus = 0
        allow_internet = true
        mcp_servers = []

        [verifier.env]
        LEVEL = "3"

        [solution.env]
        HINT = "bfs"
    """,
    "environment/Dockerfile": """
        FROM ubuntu:24.04
        RUN apt-get update && apt-get install -y python3-pytest
        WORKDIR /workspace
        COPY data/map.txt /workspace/map.txt
    """,
    "environment/data/map.txt": "S..\n.#.\n..G\n",
    "solution/solve.sh": "#!/bin/bash\necho 4 > /workspace/answer.txt\n",
    "tests/test.sh": """
        #!/bin/bash
        pytest /tests/test_outputs.py -rA
        if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
    """,
    "tests/test_outputs.py": "def test_answer():\n    assert open('/workspace/answer.txt').read().strip() == '4'\n",
}


def test_a_terminal_bench_1_task_loads_with_every_key(tmp_path):
    task = load_task(write_tree(tmp_path / "csv-summary", TB1_TASK))
    assert task.format == TB1 and task.instruction == "Summarise /app/data.csv into /app/summary.txt."
    assert task.author == "A. Author <a@example.com>" and task.category == "data-processing"
    assert (task.max_agent_timeout_sec, task.max_test_timeout_sec, task.run_tests_in_same_shell) == (900.0, 180.0, False)
    assert task.extra == {"disable_asciinema": False, "estimated_duration_sec": None, "expert_time_estimate_min": 5,
                          "junior_time_estimate_min": 15}
    assert task.dockerfile == task.path / "Dockerfile" and task.environment_dir == task.path
    assert task.compose_file == task.path / "docker-compose.yaml"
    assert task.solution_script is None and task.has_solution
    assert task.solution_commands == (SolutionCommand("python3 -c 'print(1)' > summary.txt", 0.1, True, True),
                                      SolutionCommand("ls", 0.0, False, False))


def test_a_client_dockerfile_is_the_build_context(tmp_path):
    files = {k: v for k, v in TB1_TASK.items() if k != "Dockerfile"}
    files["client/Dockerfile"] = "FROM python:3.12\nWORKDIR /app\n"
    task = load_task(write_tree(tmp_path / "t", files))
    assert task.dockerfile == task.path / "client" / "Dockerfile" and task.environment_dir == task.path / "client"


@pytest.mark.parametrize("change, words", [
    (("task.yaml", "instruction: x\nparser_name: swebench\n"), "parser_name 'swebench' is not supported"),
    (("task.yaml", "instruction: x\nrun_tests_in_same_shell: sometimes\n"), "'run_tests_in_same_shell' must be true or false"),
    (("task.yaml", "instruction: x\nmax_agent_timeout_sec: -1\n"), "'max_agent_timeout_sec' must be a positive"),
    (("solution.yaml", "- cmd: ls\n"), "solution.yaml entry 0 has no 'command'"),
    (("solution.yaml", "[]\n"), "solution.yaml must be a non-empty list"),
    (("solution.yaml", "- command: ls\n  wait: 3\n"), "unknown keys ['wait']"),
])
def test_terminal_bench_1_settings_are_honoured_or_refused(tmp_path, change, words):
    task_dir = write_tree(tmp_path / "t", TB1_TASK)
    (task_dir / change[0]).write_text(change[1])
    with pytest.raises(TaskFormatError) as exc:
        load_task(task_dir)
    assert "'t'" in str(exc.value) and words in str(exc.value)


def test_a_harbor_task_loads(tmp_path):
    task = load_task(write_tree(tmp_path / "a-star", HARBOR_TASK))
    assert task.format == HARBOR and task.instruction == "Find the shortest path in /workspace/map.txt."
    assert (task.max_agent_timeout_sec, task.max_test_timeout_sec) == (900.0, 240.0)
    assert task.author == "Terminal Bench <bench@example.com>" and task.tags == ("coding",)
    assert task.dockerfile == task.path / "environment" / "Dockerfile"
    assert task.environment_dir == task.path / "environment" and task.allow_internet
    assert task.resources == {"cpus": 1, "memory_mb": 2048, "storage_mb": 10240, "gpus": 0, "build_timeout_sec": 600.0}
    assert task.run_tests_script == task.path / "tests" / "test.sh" and task.tests_dir == task.path / "tests"
    assert task.solution_script == task.path / "solution" / "solve.sh"
    assert task.verifier_env == {"LEVEL": "3"} and task.solution_env == {"HINT": "bfs"}
    assert task.reward_file == "/logs/verifier/reward.txt"
    assert task.extra == {"version": "1.0", "metadata": {"expert_time_estimate_min": 30.0}}


@pytest.mark.parametrize("change, words", [
    (("instruction.md", None), "without instruction.md"),
    (("instruction.md", "  \n"), "instruction.md is empty"),
    (("task.toml", "[agent\n"), "not valid TOML"),
    (("task.toml", "[environment]\ngpus = 1\n"), "gpus = 1: no backend here gives a task container GPUs"),
    (("task.toml", "[environment]\nmcp_servers = [\"x\"]\n"), "MCP servers"),
    (("task.toml", "[verifier]\ntimeout_sec = 0\n"), "'timeout_sec' must be a positive number"),
    (("tests/test.sh", None), "no tests/test.sh"),
    (("environment/Dockerfile", None), "environment/ has no Dockerfile"),
])
def test_a_malformed_harbor_task_is_refused_with_the_reason(tmp_path, change, words):
    task_dir = write_tree(tmp_path / "h", HARBOR_TASK)
    name, text = change
    if text is None:
        (task_dir / name).unlink()
    else:
        (task_dir / name).write_text(text)
    if name == "instruction.md" and text is None:  # without instruction.md the folder is not a Harbor task at all
        with pytest.raises(TaskFormatError, match="no task folder in"):
            load_tasks(tmp_path)
        with pytest.raises(TaskFormatError, match=words):
            load_task(task_dir)
        return
    with pytest.raises(TaskFormatError) as exc:
        load_task(task_dir)
    assert "'h'" in str(exc.value) and words in str(exc.value)


def test_both_formats_load_from_one_root_and_nothing_is_an_error(tmp_path, capsys):
    write_tree(tmp_path / "tasks" / "tb1" / "csv-summary", TB1_TASK)
    write_tree(tmp_path / "tasks" / "tb2" / "a-star", HARBOR_TASK)
    assert [(t.name, t.format) for t in load_tasks(tmp_path / "tasks")] == [("csv-summary", TB1), ("a-star", HARBOR)]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskFormatError, match="no task folder in .*task.yaml .*task.toml"):
        load_tasks(tmp_path / "empty")
    write_tree(tmp_path / "broken" / "b", {"task.yaml": "category: x\n", "run-tests.sh": "true\n"})
    with pytest.raises(TaskFormatError, match="no task loaded .*malformed"):
        load_tasks(tmp_path / "broken", skip_invalid=True)
    # the check command says so and fails, instead of "0/0 tasks ok"
    assert check_main(["--tasks-dir", str(tmp_path / "empty")]) == 2
    assert "no task folder" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ the Dockerfile


def test_the_dockerfile_parses_like_docker_reads_it():
    instructions = parse_dockerfile(textwrap.dedent("""
        # escape=\\
        FROM python:3.12 AS base
        ARG VERSION=1
        RUN ["python3", "-c", "print(1)"]
        COPY --chown=1000:1000 a.txt \\
             b.txt /app/
        # a comment
        ENV A=1 B="two words"
        run echo hi
    """))
    assert [i.keyword for i in instructions] == ["FROM", "ARG", "RUN", "COPY", "ENV", "RUN"]
    assert instructions[2].json_args == ("python3", "-c", "print(1)")
    assert instructions[3].flags == {"chown": "1000:1000"} and instructions[3].value == "a.txt b.txt /app/"
    assert instructions[3].line == 6 and instructions[5].value == "echo hi"
    assert command_names("cd /app && X=1 python3 run.py | sort; if true; then ls; fi") == \
        ["cd", "python3", "sort", "true", "ls"]


def test_a_dockerfile_that_copies_and_runs_host_commands_builds_in_the_sandbox(tmp_path):
    task = load_task(write_tree(tmp_path / "csv-summary", TB1_TASK))
    build = sandbox_build(task.dockerfile, task.environment_dir, compose_file=task.compose_file)
    assert build.copies == [(task.path / "data.csv", "/app/data.csv"), (task.path / "inputs", "/app/inputs")]
    assert build.commands == ["mkdir -p out && cp data.csv out/copy.csv"]
    assert build.env == {"MODE": "fast", "LEVEL": "2"}


@pytest.mark.parametrize("dockerfile, reason", [
    ("FROM ubuntu\nRUN apt-get update && apt-get install -y jq\n", "RUN apt-get (installs software"),
    ("FROM python:3.12\nWORKDIR /app\nRUN pip install pandas\n", "RUN pip (installs software"),
    ("FROM python:3.12\nWORKDIR /workspace\n", "WORKDIR /workspace (the sandbox's working directory is /app)"),
    ("FROM python:3.12\nWORKDIR /app\nCOPY data.csv /etc/data.csv\n", "COPY to /etc/data.csv (outside /app"),
    ("FROM python:3.12 AS b\nFROM debian\n", "a multi-stage build"),
    ("FROM python:3.12\nWORKDIR /app\nCOPY --from=b /x /app/x\n", "COPY --from"),
    ("FROM python:3.12\nWORKDIR /app\nADD https://example.com/x.tgz /app/\n", "ADD https://example.com/x.tgz"),
    ("FROM python:3.12\nWORKDIR /app\nRUN some-tool-nobody-has --go\n", "RUN some-tool-nobody-has, which this machine"),
    ("FROM python:3.12\nWORKDIR /app\nCOPY ../secret /app/\n", "reaches outside the build context"),
    ("FROM python:3.12\nWORKDIR /app\nCOPY missing.txt /app/\n", "missing.txt: not in the build context"),
    ("FROM python:3.12\nWORKDIR /app\nCMD [\"python3\", \"server.py\"]\n", "CMD (a process the container starts)"),
    ("FROM python:3.12\nRUN mkdir -p data\n", "RUN before any WORKDIR /app"),
    ("FROM python:3.12\nRUN <<EOF\necho hi\nEOF\n", "here-documents"),
])
def test_what_the_sandbox_cannot_build_is_refused_with_the_reason(tmp_path, dockerfile, reason):
    write_tree(tmp_path / "ctx", {"data.csv": "a\n", "Dockerfile": dockerfile})
    with pytest.raises(NeedsDocker) as exc:
        sandbox_build(tmp_path / "ctx" / "Dockerfile", tmp_path / "ctx")
    assert str(exc.value).startswith("needs the Docker backend: ") and reason in str(exc.value)


def test_a_compose_file_with_services_needs_docker(tmp_path):
    write_tree(tmp_path / "ctx", {"Dockerfile": "FROM python:3.12\nWORKDIR /app\n", "docker-compose.yaml": """
        services:
          client:
            build: .
          redis:
            image: redis:7
    """})
    with pytest.raises(NeedsDocker, match="services client, redis beside the agent's container"):
        sandbox_build(tmp_path / "ctx" / "Dockerfile", tmp_path / "ctx", tmp_path / "ctx" / "docker-compose.yaml")


# ------------------------------------------------------------------------------------------ reward semantics


@pytest.mark.parametrize("accuracy, pass_rate, solved", [(1.0, 1.0, 1.0), (0.5, 0.0, -1.0), (0.0, -1.0, -1.0)])
def test_both_reward_semantics_are_reported_and_the_flag_chooses_what_trains(accuracy, pass_rate, solved):
    import generate  # terminal-rl/generate.py, on the path as its launchers put it

    meta = {"accuracy": accuracy}
    upstream, terminal_bench = generate.outcome(meta), generate.outcome(meta, mode="solved")
    assert upstream["score"] == upstream["pass_rate_score"] == pass_rate
    assert terminal_bench["score"] == solved and terminal_bench["pass_rate_score"] == pass_rate
    assert upstream["solved"] == terminal_bench["solved"] == float(accuracy == 1.0)
    with pytest.raises(ValueError, match="terminal reward mode 'binary'"):
        generate.outcome(meta, mode="binary")


def test_the_reward_flag_is_the_folders_and_defaults_to_upstreams():
    from slime.utils.arguments import parse_args

    base = ["--hf-checkpoint", "tiny", "--rollout-batch-size", "4", "--num-rollout", "1",
            "--disable-rollout-global-dataset", "--custom-generate-function-path", "generate.generate"]
    assert parse_args(base).terminal_reward == "pass-rate"
    assert parse_args([*base, "--terminal-reward", "solved"]).terminal_reward == "solved"


# ------------------------------------------------------------------------------------------ task images (pure parts)


def test_the_base_images_a_dockerfile_names_and_which_have_a_stand_in(tmp_path):
    from slime.agentic.terminal.task_images import base_images, stands_in_for

    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM python:3.13-slim AS build\nRUN true\nFROM build\nFROM ubuntu:24.04\n")
    assert base_images(dockerfile) == ["python:3.13-slim", "ubuntu:24.04"]
    assert all(stands_in_for(b) for b in ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", "ubuntu:24.04",
                                          "debian:bookworm", "python:3.12", "ubuntu"))
    assert not any(stands_in_for(b) for b in ("node:20", "rust:1.80", "ghcr.io/other/image:1", "alpine"))


def test_an_image_tag_changes_with_the_dockerfile_the_context_and_the_stand_in(tmp_path):
    from slime.agentic.terminal.task_images import image_tag

    task = load_task(write_tree(tmp_path / "Csv Summary!", TB1_TASK))
    first = image_tag(task, "python=sha256:1")
    assert first.startswith("slime-task/csv-summary:") and first == image_tag(task, "python=sha256:1")
    assert image_tag(task, "python=sha256:2") != first  # another stand-in: another build
    (task.path / "data.csv").write_text("a,b\n9,9\n")
    assert image_tag(task, "python=sha256:1") != first


def test_the_offline_kits_curl_names_what_it_cannot_serve_and_its_layer_keeps_the_images_path(tmp_path):
    import subprocess

    from slime.agentic.terminal import offline_kit

    shim = tmp_path / "curl"
    shim.write_text(offline_kit.CURL_SHIM)
    done = subprocess.run(["bash", str(shim), "-sS", "--max-time", "5", "https://127.0.0.1:9/data.csv"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0  # the real curl still runs (and fails: nothing listens there)
    assert "https://127.0.0.1:9/data.csv is not available offline" in done.stderr
    dockerfile = offline_kit.dockerfile_with_kit("slime-task-authors/t:1")
    assert dockerfile.startswith("FROM slime-task-authors/t:1\nCOPY . /opt/slime-offline\n")
    assert "UV_OFFLINE=1" in dockerfile and "PATH=/opt/slime-offline/bin:$PATH" in dockerfile


def test_the_import_report_counts_one_reason_once_whichever_task_it_names():
    from slime.agentic.terminal.import_tasks import _reason_kind

    kinds = {_reason_kind(f"ImageBuildError: task {name!r}: base image buildpack-deps:jammy cannot be pulled here "
                          "and has no local stand-in (stand-ins exist for ...)") for name in ("a", "polyglot_cpp_b")}
    [kind] = kinds
    assert kind.startswith("ImageBuildError: base image buildpack-deps:jammy cannot be pulled here")
    assert _reason_kind("TaskSetupError: task '15': cannot list its tests\nthe tail") == \
        "TaskSetupError: cannot list its tests"
