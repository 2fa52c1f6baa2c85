"""The shipped GUI tasks on real desktops (`python -m slime.agentic.gui.check`'s checks): each task's scripted
solution, played through the `gui` provider on a fresh desktop, scores 1; then doing nothing on a fresh reset
scores 0 (the reset restored the state the solution changed). The default run checks one feasible task of each app and one infeasible task;
every task is checked by the `gui_full` tier (`pytest -m gui_full`, about 7 minutes on 2 cores)."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic.gui.check import check_tasks
from slime.agentic.gui.tasks import load_tasks

from helpers.gui_env import requires_desktop

pytestmark = [
    *requires_desktop("chromium"),
    pytest.mark.timeout(1800),
]
TASKS = load_tasks()


def sample() -> list:
    """The first feasible task of each app, and the first infeasible one."""
    picked, domains = [], set()
    for task in TASKS:
        if not task.infeasible and task.domain not in domains:
            picked.append(task)
            domains.add(task.domain)
    return picked + [next(t for t in TASKS if t.infeasible)]


def check(tasks, tmp_path) -> None:
    results = asyncio.run(check_tasks(tasks, str(tmp_path)))
    failed = [r.line() for r in results if not r.ok]
    assert not failed, "\n".join(failed)
    assert len(results) == len(tasks)


def test_the_shipped_set_has_enough_tasks_of_every_kind():
    domains = {t.domain for t in TASKS}
    assert len(TASKS) >= 30 and sum(t.infeasible for t in TASKS) >= 3
    assert {"notes", "settings", "files"} <= domains and sum(d.startswith("web-") for d in domains) >= 3


def test_one_task_of_each_app_checks_out(tmp_path):
    check(sample(), tmp_path)


@pytest.mark.gui_full
def test_every_task_checks_out(tmp_path):
    check(TASKS, tmp_path)
