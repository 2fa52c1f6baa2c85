"""Terminal-Bench 2.0 / Harbor task folders, loaded into the same `TerminalTask` as Terminal-Bench 1.x's.

    <task-name>/instruction.md, task.toml, environment/ (Dockerfile, build context), solution/solve.sh,
    tests/test.sh (+ the files it runs)

`task.toml` is read whole: [metadata] author_name/author_email, difficulty, category, tags; [agent] timeout_sec;
[verifier] timeout_sec and env; [environment] build_timeout_sec, cpus, memory_mb, storage_mb, gpus, allow_internet,
mcp_servers; [solution] env. A key this loader does not know is kept in `TerminalTask.extra` (by its table), and a
setting no backend here can honour is refused (GPUs, MCP servers) rather than ignored. Harbor's verifier writes the
reward (a number, 1 = solved) to /logs/verifier/reward.txt, or reward.json with a "reward" key.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .tasks import (DEFAULT_TEST_TIMEOUT_S, HARBOR, HARBOR_INSTRUCTION_FILE, HARBOR_TASK_FILE, TaskFormatError,
                    TerminalTask, _author, _err, _file, _flag, _optional_str, _seconds, _tags)

REWARD_FILE = "/logs/verifier/reward.txt"
_KNOWN = {
    "metadata": {"author_name", "author_email", "difficulty", "category", "tags"},
    "agent": {"timeout_sec"},
    "verifier": {"timeout_sec", "env"},
    "environment": {"build_timeout_sec", "cpus", "memory_mb", "storage_mb", "gpus", "allow_internet", "mcp_servers",
                    "docker_image"},
    "solution": {"env"},
}


def _table(path: Path, data: dict, name: str) -> dict:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise _err(path, f"{HARBOR_TASK_FILE}: [{name}] must be a table, got {type(value).__name__}")
    return value


def _env(path: Path, table: dict, where: str) -> dict[str, str]:
    env = table.get("env", {}) or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise _err(path, f"{HARBOR_TASK_FILE}: [{where}.env] must be a table of strings")
    return {k: str(v) for k, v in env.items()}


def _resources(path: Path, env_table: dict) -> dict[str, Any]:
    resources = {}
    for key in ("cpus", "memory_mb", "storage_mb", "gpus", "build_timeout_sec"):
        value = env_table.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise _err(path, f"{HARBOR_TASK_FILE}: [environment] {key} must be a non-negative number, got {value!r}")
        resources[key] = value
    if resources.get("gpus"):
        raise _err(path, f"{HARBOR_TASK_FILE}: [environment] gpus = {resources['gpus']}: no backend here gives a task "
                         "container GPUs")
    if env_table.get("mcp_servers"):
        raise _err(path, f"{HARBOR_TASK_FILE}: [environment] mcp_servers: MCP servers for the agent are not provided "
                         "here")
    return resources


def load_harbor_task(path: Path) -> TerminalTask:
    """One Harbor task folder; TaskFormatError names the folder and what is missing or malformed."""
    instruction_file = _file(path, HARBOR_INSTRUCTION_FILE)
    if instruction_file is None:
        raise _err(path, f"{HARBOR_TASK_FILE} without {HARBOR_INSTRUCTION_FILE} (the instruction the agent is given)")
    try:
        data = tomllib.loads((path / HARBOR_TASK_FILE).read_text(encoding="utf-8"))
        instruction = instruction_file.read_text(encoding="utf-8").strip()
    except tomllib.TOMLDecodeError as e:
        raise _err(path, f"{HARBOR_TASK_FILE} is not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _err(path, f"cannot read the task files: {e}") from None
    if not instruction:
        raise _err(path, f"{HARBOR_INSTRUCTION_FILE} is empty")
    metadata, agent, verifier, environment, solution = (_table(path, data, name) for name in _KNOWN)
    environment_dir = path / "environment"
    if not environment_dir.is_dir():
        raise _err(path, "no environment/ folder (the Dockerfile and its build context)")
    dockerfile = _file(environment_dir, "Dockerfile")
    if dockerfile is None and not environment.get("docker_image"):
        raise _err(path, "environment/ has no Dockerfile (and task.toml names no [environment] docker_image)")
    tests_dir = path / "tests"
    run_tests = _file(tests_dir, "test.sh") if tests_dir.is_dir() else None
    if run_tests is None:
        raise _err(path, "no tests/test.sh (the verifier: it runs the tests and writes the reward)")
    extra: dict[str, Any] = {k: v for k, v in data.items() if k not in _KNOWN}
    for name, known in _KNOWN.items():
        unknown = {k: v for k, v in _table(path, data, name).items() if k not in known}
        if unknown:
            extra[name] = unknown
    if environment.get("docker_image"):
        extra["docker_image"] = str(environment["docker_image"])
    return TerminalTask(
        name=path.name,
        path=path,
        instruction=instruction,
        tests_dir=tests_dir,
        run_tests_script=run_tests,
        solution_script=_file(path / "solution", "solve.sh") if (path / "solution").is_dir() else None,
        max_test_timeout_sec=_seconds(path, verifier, "timeout_sec", DEFAULT_TEST_TIMEOUT_S, "[verifier]"),
        max_agent_timeout_sec=_seconds(path, agent, "timeout_sec", None, "[agent]"),
        category=_optional_str(path, metadata, "category"),
        difficulty=_optional_str(path, metadata, "difficulty"),
        tags=_tags(path, metadata),
        author=_author(path, metadata),
        dockerfile=dockerfile,
        environment_dir=environment_dir,
        compose_file=_file(environment_dir, "docker-compose.yaml") or _file(environment_dir, "docker-compose.yml"),
        allow_internet=_flag(path, environment, "allow_internet", "[environment]"),
        resources=_resources(path, environment),
        verifier_env=_env(path, verifier, "verifier"),
        solution_env=_env(path, solution, "solution"),
        reward_file=REWARD_FILE,
        extra=extra,
        format=HARBOR,
    )


__all__ = ["REWARD_FILE", "TaskFormatError", "load_harbor_task"]
