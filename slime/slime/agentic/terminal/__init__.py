"""Terminal RL tasks: terminal-bench's task layout and loader (:mod:`.tasks`), pytest's JUnit XML and the outcome
reward ``2 * passed / total - 1`` (:mod:`.junit`), and a task's sandboxed workspace with its setup and evaluation
(:mod:`.workspace`). The shipped tasks live in ``terminal-rl/tasks/``."""

from .junit import (
    CaseResult,
    JUnitReport,
    parse_junit_xml,
    pass_rate_reward,
    read_junit_xml,
)
from .tasks import TaskFormatError, TerminalTask, find_task_dirs, load_task, load_tasks
from .workspace import (
    APP_DIR,
    TESTS_MOUNT,
    EvalOutcome,
    TaskSetupError,
    TaskWorkspace,
    evaluate_solution,
)

__all__ = [
    "APP_DIR",
    "TESTS_MOUNT",
    "CaseResult",
    "EvalOutcome",
    "JUnitReport",
    "TaskFormatError",
    "TaskSetupError",
    "TaskWorkspace",
    "TerminalTask",
    "evaluate_solution",
    "find_task_dirs",
    "load_task",
    "load_tasks",
    "parse_junit_xml",
    "pass_rate_reward",
    "read_junit_xml",
]
