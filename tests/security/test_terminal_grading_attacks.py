"""Adversarial terminal agents (issue 37): on every shipped task, an agent that solves nothing and leaves code that
the tests may run (every script and module of /app replaced, git hooks, fsmonitor and filters, conftest.py,
sitecustomize.py, .pth, pytest.ini, dotfiles) tries to forge the report and reach the test process
(tests/helpers/hostile.py). It must score no higher than doing nothing, which must score the minimum (-1)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helpers.hostile import BREACHES, EVIDENCE, PLANT
from slime.agentic.terminal.tasks import DEFAULT_TASKS_DIR
from slime.agentic.terminal.workspace import TaskWorkspace
from slime.agentic import sandbox as sb

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")

TASKS = sorted(p.name for p in Path(DEFAULT_TASKS_DIR).iterdir() if (p / "task.yaml").exists())
# tasks whose tests execute code of the agent's (a script, a module, git in /app): the payload must have run there
RUNS_AGENT_CODE = {"fix-backup-script", "fix-config-merge", "fix-csv-report", "fix-python-stats", "rename-function"}


async def _episode(task: str, attack: bool):
    ws = await TaskWorkspace.create(Path(DEFAULT_TASKS_DIR) / task)
    try:
        if attack:
            planted = await ws.run(PLANT)
            assert planted.exit_code == 0, planted.stderr
        outcome = await ws.run_tests()
        evidence_file = ws.app_host / Path(EVIDENCE).name
        evidence = [json.loads(line) for line in evidence_file.read_text().splitlines()] if evidence_file.exists() else []
        return outcome, evidence
    finally:
        await ws.aclose()


@pytest.mark.parametrize("task", TASKS)
def test_an_agent_that_forges_scores_no_higher_than_doing_nothing(task):
    idle, _ = asyncio.run(_episode(task, attack=False))
    assert idle.reward == -1.0, f"{task}: doing nothing scores {idle.reward} ({idle.outcomes}): a task bug"
    attacked, evidence = asyncio.run(_episode(task, attack=True))
    assert attacked.reward <= idle.reward and not attacked.success, (task, attacked.as_dict())
    breaches = [(k, e[k]) for e in evidence for k in BREACHES if k in e]
    assert not breaches, f"{task}: the payload reached the report or the test process: {breaches}"
    # it ran, at test time, where the tests execute agent code; a forged report it wrote was not read
    if task in RUNS_AGENT_CODE:
        assert evidence, f"{task}: the payload never ran in the test phase"
        assert any("junit_written" in e for e in evidence)  # it wrote a passing report where it could, unread


def test_git_in_the_test_phase_runs_none_of_the_agents_hooks_fsmonitor_or_pager():
    async def go():
        ws = await TaskWorkspace.create(Path(DEFAULT_TASKS_DIR) / "git-tag-release")
        try:
            plant = ("cd repo && git config core.fsmonitor 'echo FSMON >&2; false' && git config core.pager 'echo PAGER' "
                     "&& printf '#!/bin/sh\\necho HOOK >&2\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout")
            assert (await ws.run(plant)).ok
            probe = "cd repo && git status >/dev/null && git checkout -q -b {} && git log -1 --oneline | cat"
            as_agent = await ws.run(probe.format("agent"))
            as_tests = await ws.sandbox.run(probe.format("tests"), env=ws._test_env())
            return as_agent, as_tests
        finally:
            await ws.aclose()

    as_agent, as_tests = asyncio.run(go())
    assert "FSMON" in as_agent.stderr and "HOOK" in as_agent.stderr  # the agent's config is live in its own shell
    assert as_tests.ok and "FSMON" not in as_tests.stderr and "HOOK" not in as_tests.stderr, as_tests
