"""Generated terminal tasks (terminal-rl/terminal_families.py), in real bubblewrap sandboxes: for one training
instance of every variant of every training family, and one instance of every held-out family and one held-out
draw of every training family, the scripted solution passes every test of the instance and a workspace where
nothing was done fails them all (reward -1). The benchmark's demonstrations verify every demonstration instance the
same way at run time.

Skipped with the reason where this host cannot run the bwrap sandbox."""

from __future__ import annotations

import asyncio
import os

import pytest
from slime.agentic import sandbox as sb
from slime.agentic.task_families import load_data_files
from slime.agentic.terminal import load_tasks
from slime.agentic.terminal.check import check_tasks
from terminal_families import FAMILIES, TRAIN_FAMILIES, family_of, write_families

_CAP = sb.detect_capability("bwrap")
pytestmark = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    out = tmp_path_factory.mktemp("families")
    write_families(out, train_instances=30, heldout_instances=1, seed=7)
    data = load_data_files(out)
    first_of_variant: dict[tuple[str, str], str] = {}
    for row in data["demos"] + data["rl"]:
        first_of_variant.setdefault((row["task"]["family"], row["task"]["variant"]), row["task"]["task_path"])
    wanted = set(first_of_variant.values()) | {r["task"]["task_path"]
                                               for r in data["heldout_instances"] + data["heldout_tasks"]}
    tasks = [t for t in load_tasks(out / "tasks") if t.name in wanted]
    base = tmp_path_factory.mktemp("family-workspaces")
    results = asyncio.run(check_tasks(tasks, concurrency=2, base_dir=base))
    assert os.listdir(base) == [], "a workspace directory was left behind"
    return results, first_of_variant


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_family_solution_solves_its_instances_and_doing_nothing_fails(checks, family):
    results, first_of_variant = checks
    if family in {f.name for f in TRAIN_FAMILIES}:  # every variant was drawn among 30 instances, and checked
        assert len([v for f, v in first_of_variant if f == family]) >= 4
    mine = [c for c in results if family_of(c.task.name) == family]
    assert mine, f"no instance of {family} was checked"
    for c in mine:
        assert not c.error, c.error
        assert c.solved.success and c.solved.reward == 1.0, f"{c.task.name}: {c.solved.outcomes} {c.solved.output_tail}"
        assert c.unsolved.reason == "" and c.unsolved.passed == 0 and c.unsolved.reward == -1.0, \
            f"{c.task.name} passes without doing anything: {c.unsolved.outcomes}"
