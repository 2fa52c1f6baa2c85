"""Generated terminal tasks (slime.agentic.terminal.families), in real bubblewrap sandboxes: for two instances of
every family (one training, one held-out draw), the family's one scripted solution passes every test of the
instance and a workspace where nothing was done fails them all (reward -1). The benchmark's demonstrations verify
every demonstration instance the same way at run time.

Skipped with the reason where this host cannot run the bwrap sandbox."""

from __future__ import annotations

import asyncio
import os

import pytest
from slime.agentic import sandbox as sb
from slime.agentic.terminal import load_tasks
from slime.agentic.terminal.check import check_tasks
from slime.agentic.terminal.families import FAMILIES, family_of, write_families

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    out = tmp_path_factory.mktemp("families")
    write_families(out, train_instances=2, heldout_instances=1, seed=7)
    tasks = [t for t in load_tasks(out / "tasks") if t.name.endswith(("-t001", "-h000"))]
    base = tmp_path_factory.mktemp("family-workspaces")
    results = asyncio.run(check_tasks(tasks, concurrency=2, base_dir=base))
    assert os.listdir(base) == [], "a workspace directory was left behind"
    return results


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_family_solution_solves_its_instances_and_doing_nothing_fails(checks, family):
    mine = [c for c in checks if family_of(c.task.name) == family]
    assert mine, f"no instance of {family} was checked"
    for c in mine:
        assert not c.error, c.error
        assert c.solved.success and c.solved.reward == 1.0, f"{c.task.name}: {c.solved.outcomes} {c.solved.output_tail}"
        assert c.unsolved.reason == "" and c.unsolved.passed == 0 and c.unsolved.reward == -1.0, \
            f"{c.task.name} passes without doing anything: {c.unsolved.outcomes}"
