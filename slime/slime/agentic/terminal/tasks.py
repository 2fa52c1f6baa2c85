"""Terminal tasks as Terminal-Bench ships them, and their loader: both formats, unchanged.

Terminal-Bench 1.x (and this project's own tasks), a folder whose name is the task's name::

    <task-name>/
        task.yaml          instruction (required; or the older descriptions: [{key: base, description}]),
                           max_test_timeout_sec (default 60), max_agent_timeout_sec, run_tests_in_same_shell,
                           parser_name (pytest), category, difficulty, tags, author or author_name/author_email,
                           and Terminal-Bench's bookkeeping keys (time estimates, disable_asciinema), kept as read
        Dockerfile         the task's environment (or client/Dockerfile), built by the Docker backend; the
                           sandbox backend runs it only when it copies files and runs host commands (`.dockerfile`)
        docker-compose.yaml  services beside the agent's container (Docker backend)
        setup.sh           this project's tasks: prepares /app for the sandbox backend instead of a Dockerfile
        solution.sh        a known correct solution, run in the task's working directory (or solution.yaml: a
                           list of {command, min_timeout_sec, block, append_enter} typed into the agent's shell)
        run-tests.sh       runs the tests; a task's tests may live in it alone
        tests/             the tests, copied to /tests only when the episode is evaluated (optional)

Terminal-Bench 2.0 / Harbor::

    <task-name>/
        instruction.md     the instruction
        task.toml          [metadata] (author, difficulty, category, tags), [agent] timeout_sec, [verifier]
                           timeout_sec and env, [environment] build_timeout_sec, cpus, memory_mb, storage_mb, gpus,
                           allow_internet, [solution] env
        environment/       the build context: Dockerfile (and docker-compose.yaml) with the files it copies
        solution/solve.sh  the reference solution
        tests/test.sh      runs the tests and writes the reward to /logs/verifier/reward.txt (or reward.json)

``load_tasks(root)`` finds every task folder below `root` (a folder holding task.yaml, or task.toml with
instruction.md; task folders do not nest), in name order, optionally filtered by names or glob patterns. A root with
no task, or a task that does not load, raises :class:`TaskFormatError` naming the folder and what is missing or
malformed: nothing is skipped silently (``skip_invalid=True`` leaves malformed tasks out with a warning, and still
raises when none is left).
"""

from __future__ import annotations

import fnmatch
import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)

TASK_FILE = "task.yaml"
HARBOR_TASK_FILE = "task.toml"
HARBOR_INSTRUCTION_FILE = "instruction.md"
SETUP_FILE = "setup.sh"
SOLUTION_FILE = "solution.sh"
RUN_TESTS_FILE = "run-tests.sh"
TESTS_DIR = "tests"
DEFAULT_TEST_TIMEOUT_S = 60.0
# the shipped tasks, in a checkout of this repository (a tasks folder anywhere else is given by path)
DEFAULT_TASKS_DIR = Path(__file__).resolve().parents[4] / "terminal-rl" / "tasks"
DATA_SOURCE = "terminal_bench"
TB1, HARBOR = "terminal-bench-1", "harbor"
SUPPORTED_PARSERS = ("pytest",)  # the tests' results are read from pytest's JUnit XML
_KNOWN_KEYS = {
    "instruction", "descriptions", "max_test_timeout_sec", "category", "difficulty", "tags", "author",
    "author_name", "author_email", "parser_name", "max_agent_timeout_sec", "run_tests_in_same_shell",
}
_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", "node_modules"}


class TaskFormatError(ValueError):
    """A task folder is missing something or has a malformed task.yaml; the message names the folder."""


@dataclass(frozen=True)
class SolutionCommand:
    """One entry of a Terminal-Bench 1.x solution.yaml: keystrokes typed into the agent's shell."""

    command: str
    min_timeout_sec: float = 0.0  # wait at least this long after sending it
    block: bool = False  # wait until the command finished
    append_enter: bool = True


@dataclass(frozen=True)
class TerminalTask:
    name: str
    path: Path  # the task folder (absolute)
    instruction: str
    tests_dir: Path | None  # None: the tests live in the run-tests script alone
    run_tests_script: Path
    setup_script: Path | None = None
    solution_script: Path | None = None
    max_test_timeout_sec: float = DEFAULT_TEST_TIMEOUT_S
    category: str | None = None
    difficulty: str | None = None
    tags: tuple[str, ...] = ()
    author: str | None = None
    parser_name: str = "pytest"
    dockerfile: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    format: str = TB1
    environment_dir: Path | None = None  # the Docker build context (the folder the Dockerfile's COPY reads)
    compose_file: Path | None = None
    solution_commands: tuple[SolutionCommand, ...] = ()  # solution.yaml, when there is no solution script
    max_agent_timeout_sec: float | None = None
    run_tests_in_same_shell: bool = False
    allow_internet: bool = False  # during the agent phase (builds reach the package registries in any case)
    resources: dict[str, Any] = field(default_factory=dict, compare=False)  # Harbor's cpus, memory_mb, ...
    verifier_env: dict[str, str] = field(default_factory=dict, compare=False)  # set for the tests (Harbor)
    solution_env: dict[str, str] = field(default_factory=dict, compare=False)  # set for the solution (Harbor)
    reward_file: str | None = None  # Harbor: where tests/test.sh writes the reward, inside the container

    @property
    def has_solution(self) -> bool:
        return self.solution_script is not None or bool(self.solution_commands)

    def to_record(self, relative_to: str | os.PathLike | None = None) -> dict:
        """One line of a task dataset (upstream's convert_task_to_dataset format)."""
        task_path = os.path.relpath(self.path, relative_to) if relative_to is not None else str(self.path)
        return {"task": {"task_name": self.name, "task_path": task_path, "instruction": self.instruction, "data_source": DATA_SOURCE}}


def _err(path: Path, problem: str) -> TaskFormatError:
    return TaskFormatError(f"task {path.name!r} ({path}): {problem}")


def _optional_str(path: Path, data: dict, key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise _err(path, f"{TASK_FILE}: {key!r} must be a string, got {type(value).__name__}")
    return str(value)


def _instruction(path: Path, data: dict) -> str:
    value = data.get("instruction")
    if value is None and isinstance(data.get("descriptions"), list):  # terminal-bench's older form
        for item in data["descriptions"]:
            if isinstance(item, dict) and item.get("key", "base") == "base":
                value = item.get("description")
                break
    if value is None:
        raise _err(path, f"{TASK_FILE} has no 'instruction' (the task text the agent is given)")
    if not isinstance(value, str) or not value.strip():
        raise _err(path, f"{TASK_FILE}: 'instruction' must be a non-empty string")
    return value.strip()


def _seconds(path: Path, data: dict, key: str, default: float | None, where: str = TASK_FILE) -> float | None:
    """A positive number of seconds under `key`, `default` when absent or empty."""
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _err(path, f"{where}: {key!r} must be a positive number of seconds, got {value!r}")
    return float(value)


def _flag(path: Path, data: dict, key: str, where: str = TASK_FILE) -> bool:
    value = data.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _err(path, f"{where}: {key!r} must be true or false, got {value!r}")
    return value


def _parser(path: Path, data: dict) -> str:
    name = _optional_str(path, data, "parser_name") or "pytest"
    if name not in SUPPORTED_PARSERS:
        raise _err(path, f"{TASK_FILE}: parser_name {name!r} is not supported: results are read from pytest's JUnit "
                         f"XML ({', '.join(SUPPORTED_PARSERS)}); a task whose tests are not pytest cannot be scored here")
    return name


def _solution_commands(path: Path) -> tuple[SolutionCommand, ...]:
    """Terminal-Bench 1.x's solution.yaml: a list of {command, min_timeout_sec, block, append_enter}."""
    file = _file(path, "solution.yaml")
    if file is None:
        return ()
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
        raise _err(path, f"solution.yaml does not read: {e}") from None
    if not isinstance(data, list) or not data:
        raise _err(path, "solution.yaml must be a non-empty list of {command: ...} entries")
    commands = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("command"), str):
            raise _err(path, f"solution.yaml entry {i} has no 'command' string")
        unknown = sorted(set(item) - {"command", "min_timeout_sec", "block", "append_enter"})
        if unknown:
            raise _err(path, f"solution.yaml entry {i}: unknown keys {unknown}")
        where = f"solution.yaml entry {i}"
        commands.append(SolutionCommand(item["command"], _seconds(path, item, "min_timeout_sec", None, where) or 0.0,
                                        _flag(path, item, "block", where),
                                        True if item.get("append_enter") is None else _flag(path, item, "append_enter", where)))
    return tuple(commands)


def _build_context(path: Path) -> tuple[Path | None, Path | None]:
    """(Dockerfile, build context) of a Terminal-Bench 1.x task: Dockerfile beside task.yaml, or client/Dockerfile."""
    for folder in (path, path / "client"):
        dockerfile = _file(folder, "Dockerfile") if folder.is_dir() else None
        if dockerfile is not None:
            return dockerfile, folder
    return None, None


def _tags(path: Path, data: dict) -> tuple[str, ...]:
    value = data.get("tags")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(t, (str, int, float)) and not isinstance(t, bool) for t in value):
        raise _err(path, f"{TASK_FILE}: 'tags' must be a list of strings, got {value!r}")
    return tuple(str(t) for t in value)


def _author(path: Path, data: dict) -> str | None:
    author = _optional_str(path, data, "author")
    if author is not None:
        return author
    name, email = _optional_str(path, data, "author_name"), _optional_str(path, data, "author_email")
    if name and email:
        return f"{name} <{email}>"
    return name or email


def _file(path: Path, name: str) -> Path | None:
    p = path / name
    if not p.exists():
        return None
    if not p.is_file():
        raise _err(path, f"{name} exists but is not a regular file")
    return p


def load_task(path: str | os.PathLike) -> TerminalTask:
    """Load one task folder (either format); raises TaskFormatError naming the folder and the problem."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise _err(path, "not a directory" if path.exists() else "no such task folder")
    if not (path / TASK_FILE).is_file() and (path / HARBOR_TASK_FILE).is_file():
        from .harbor import load_harbor_task

        return load_harbor_task(path)
    task_file = path / TASK_FILE
    if not task_file.is_file():
        raise _err(path, f"no {TASK_FILE} (Terminal-Bench 1.x) nor {HARBOR_TASK_FILE} + {HARBOR_INSTRUCTION_FILE} "
                         "(Terminal-Bench 2.0 / Harbor)")
    try:
        data = yaml.safe_load(task_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise _err(path, f"{TASK_FILE} is not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _err(path, f"cannot read {TASK_FILE}: {e}") from None
    if not isinstance(data, dict):
        raise _err(path, f"{TASK_FILE} must be a mapping of keys (instruction: ...), got {type(data).__name__}")
    instruction = _instruction(path, data)
    run_tests = _file(path, RUN_TESTS_FILE)
    if run_tests is None:
        raise _err(path, f"no {RUN_TESTS_FILE} (the script that runs the tests)")
    tests_dir = path / TESTS_DIR if (path / TESTS_DIR).is_dir() else None
    dockerfile, context = _build_context(path)
    solution = _file(path, SOLUTION_FILE)
    return TerminalTask(
        name=path.name,
        path=path,
        instruction=instruction,
        tests_dir=tests_dir,
        run_tests_script=run_tests,
        setup_script=_file(path, SETUP_FILE),
        solution_script=solution,
        solution_commands=() if solution is not None else _solution_commands(path),
        max_test_timeout_sec=_seconds(path, data, "max_test_timeout_sec", DEFAULT_TEST_TIMEOUT_S),
        max_agent_timeout_sec=_seconds(path, data, "max_agent_timeout_sec", None),
        run_tests_in_same_shell=_flag(path, data, "run_tests_in_same_shell"),
        category=_optional_str(path, data, "category"),
        difficulty=_optional_str(path, data, "difficulty"),
        tags=_tags(path, data),
        author=_author(path, data),
        parser_name=_parser(path, data),
        dockerfile=dockerfile,
        environment_dir=context,
        compose_file=_file(path, "docker-compose.yaml") or _file(path, "docker-compose.yml"),
        extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
        format=TB1,
    )


def is_task_dir(path: Path) -> bool:
    return (path / TASK_FILE).is_file() or ((path / HARBOR_TASK_FILE).is_file()
                                            and (path / HARBOR_INSTRUCTION_FILE).is_file())


def find_task_dirs(root: str | os.PathLike) -> list[Path]:
    """Every task folder below `root` (or `root` itself when it is one), sorted by path."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise TaskFormatError(f"tasks root {root}: {'not a directory' if root.exists() else 'no such directory'}")
    if is_task_dir(root):
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) != root and is_task_dir(Path(dirpath)):
            found.append(Path(dirpath))
            dirnames[:] = []  # a task folder's own subfolders (tests/...) hold no tasks
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
    return sorted(found)


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def load_tasks(
    root_or_paths: str | os.PathLike | Iterable[str | os.PathLike],
    names: str | Iterable[str] | None = None,
    *,
    skip_invalid: bool = False,
) -> list[TerminalTask]:
    """Load tasks from a root folder (every task folder below it) or from a list of task folders.

    `names`: task names or glob patterns (``"git-*"``), a comma-separated string allowed; a plain name that
    matches no task is an error that lists what exists. `skip_invalid`: log and leave out a malformed task instead
    of raising (the default is to raise). Two tasks with one name are an error."""
    if isinstance(root_or_paths, (str, os.PathLike)):
        dirs = find_task_dirs(root_or_paths)
        where = str(Path(root_or_paths).resolve())
    else:
        dirs = [Path(p).resolve() for p in root_or_paths]
        where = "the given task folders"
    patterns: list[str] | None = None
    if names is not None:
        patterns = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if n and n.strip()]
        available = sorted(d.name for d in dirs)
        missing = [p for p in patterns if not any(ch in p for ch in "*?[") and p not in available]
        if missing:
            raise TaskFormatError(f"no task named {', '.join(map(repr, missing))} in {where}; available: {', '.join(available) or 'none'}")
        dirs = [d for d in dirs if _matches(d.name, patterns)]
        if not dirs:
            raise TaskFormatError(f"no task matches {', '.join(map(repr, patterns))} in {where}; available: "
                                  f"{', '.join(available) or 'none'}")
    tasks: list[TerminalTask] = []
    seen: dict[str, Path] = {}
    for d in dirs:
        try:
            task = load_task(d)
        except TaskFormatError as e:
            if not skip_invalid:
                raise
            logger.warning("skipping a malformed task: %s", e)
            continue
        if task.name in seen:
            raise TaskFormatError(f"two tasks are named {task.name!r}: {seen[task.name]} and {task.path}")
        seen[task.name] = task.path
        tasks.append(task)
    if not tasks:
        what = "no task loaded" if dirs else "no task folder"
        raise TaskFormatError(f"{what} in {where}: a task folder holds {TASK_FILE} (Terminal-Bench 1.x) or "
                              f"{HARBOR_TASK_FILE} + {HARBOR_INSTRUCTION_FILE} (Terminal-Bench 2.0 / Harbor)"
                              + (" (every task found was malformed: see the warnings)" if dirs else ""))
    return tasks


__all__ = [
    "DEFAULT_TEST_TIMEOUT_S",
    "HARBOR",
    "SolutionCommand",
    "TB1",
    "TaskFormatError",
    "TerminalTask",
    "is_task_dir",
    "find_task_dirs",
    "load_task",
    "load_tasks",
]
