"""Terminal tasks in terminal-bench's folder layout, and their loader.

A task is a folder whose name is the task's name::

    <task-name>/
        task.yaml          instruction (required), max_test_timeout_sec (default 60), and optionally category,
                           difficulty, tags, author (or terminal-bench's author_name/author_email), parser_name
        setup.sh           optional: prepares the working directory /app (replaces terminal-bench's Dockerfile)
        solution.sh        optional: a known correct solution, run in /app (tests, scripted agents)
        run-tests.sh       runs the tests; our tasks call "${PYTHON:-python3}" -m pytest ... --junitxml
        tests/             the tests (test_outputs.py), copied to /tests only when the episode is evaluated

Other keys of task.yaml are kept in ``TerminalTask.extra`` (terminal-bench's max_agent_timeout_sec,
run_tests_in_same_shell, time estimates...). terminal-bench's older ``descriptions: [{key: base, description}]``
form of the instruction is accepted too. A Dockerfile or docker-compose.yaml, when present, is recorded but not
used by the local sandbox (``TerminalTask.dockerfile``).

``load_tasks(root)`` finds every task folder below `root` (a folder that holds a task.yaml; task folders do not
nest), in name order, optionally filtered by names or glob patterns. Problems raise :class:`TaskFormatError`
naming the task folder and what is missing or malformed.
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
SETUP_FILE = "setup.sh"
SOLUTION_FILE = "solution.sh"
RUN_TESTS_FILE = "run-tests.sh"
TESTS_DIR = "tests"
DEFAULT_TEST_TIMEOUT_S = 60.0
# the shipped tasks, in a checkout of this repository (a tasks folder anywhere else is given by path)
DEFAULT_TASKS_DIR = Path(__file__).resolve().parents[4] / "terminal-rl" / "tasks"
DATA_SOURCE = "terminal_bench"
_KNOWN_KEYS = {
    "instruction", "descriptions", "max_test_timeout_sec", "category", "difficulty", "tags", "author",
    "author_name", "author_email", "parser_name",
}
_SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", "node_modules"}


class TaskFormatError(ValueError):
    """A task folder is missing something or has a malformed task.yaml; the message names the folder."""


@dataclass(frozen=True)
class TerminalTask:
    name: str
    path: Path  # the task folder (absolute)
    instruction: str
    tests_dir: Path
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


def _timeout(path: Path, data: dict) -> float:
    value = data.get("max_test_timeout_sec", DEFAULT_TEST_TIMEOUT_S)
    if value is None:
        return DEFAULT_TEST_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _err(path, f"{TASK_FILE}: 'max_test_timeout_sec' must be a positive number of seconds, got {value!r}")
    return float(value)


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
    """Load one task folder; raises TaskFormatError naming the folder and the problem."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise _err(path, "not a directory" if path.exists() else "no such task folder")
    task_file = path / TASK_FILE
    if not task_file.is_file():
        raise _err(path, f"no {TASK_FILE}")
    try:
        data = yaml.safe_load(task_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise _err(path, f"{TASK_FILE} is not valid YAML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _err(path, f"cannot read {TASK_FILE}: {e}") from None
    if not isinstance(data, dict):
        raise _err(path, f"{TASK_FILE} must be a mapping of keys (instruction: ...), got {type(data).__name__}")
    instruction = _instruction(path, data)
    timeout = _timeout(path, data)
    parser_name = _optional_str(path, data, "parser_name") or "pytest"
    if parser_name != "pytest":
        logger.warning("task %s: parser_name %r; results are read from pytest's JUnit XML in any case", path.name, parser_name)
    tests_dir = path / TESTS_DIR
    if not tests_dir.is_dir():
        raise _err(path, f"no {TESTS_DIR}/ folder (it holds test_outputs.py, run by {RUN_TESTS_FILE})")
    if not any(p.is_file() for p in tests_dir.rglob("test_*.py")) and not any(p.is_file() for p in tests_dir.rglob("*_test.py")):
        raise _err(path, f"{TESTS_DIR}/ has no pytest file (expected {TESTS_DIR}/test_outputs.py)")
    run_tests = _file(path, RUN_TESTS_FILE)
    if run_tests is None:
        raise _err(path, f"no {RUN_TESTS_FILE} (the script that runs the tests)")
    dockerfile = _file(path, "Dockerfile")
    return TerminalTask(
        name=path.name,
        path=path,
        instruction=instruction,
        tests_dir=tests_dir,
        run_tests_script=run_tests,
        setup_script=_file(path, SETUP_FILE),
        solution_script=_file(path, SOLUTION_FILE),
        max_test_timeout_sec=timeout,
        category=_optional_str(path, data, "category"),
        difficulty=_optional_str(path, data, "difficulty"),
        tags=_tags(path, data),
        author=_author(path, data),
        parser_name=parser_name,
        dockerfile=dockerfile,
        extra={k: v for k, v in data.items() if k not in _KNOWN_KEYS},
    )


def find_task_dirs(root: str | os.PathLike) -> list[Path]:
    """Every task folder below `root` (or `root` itself when it is one), sorted by path."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise TaskFormatError(f"tasks root {root}: {'not a directory' if root.exists() else 'no such directory'}")
    if (root / TASK_FILE).is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if TASK_FILE in filenames and Path(dirpath) != root:
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
    return tasks


__all__ = [
    "DEFAULT_TEST_TIMEOUT_S",
    "TaskFormatError",
    "TerminalTask",
    "find_task_dirs",
    "load_task",
    "load_tasks",
]
