"""Generated GUI tasks (gui-rl/gui_families.py) on real desktops (Xvfb, the Tk apps, OCR, in the bubblewrap
sandbox): one instance of every family, its scripted solution scores 1 and doing nothing scores 0. The benchmark
verifies every held-out instance the same way (and drops one whose words the OCR misses), the demonstrations every
demonstration instance. In the `gui_full` tier (`pytest -m gui_full`, about a minute on 2 cores)."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic.gui.check import check_tasks
from gui_families import FAMILIES, family_of, write_families
from slime.agentic.gui.tasks import load_tasks

from helpers.gui_env import requires_desktop

pytestmark = [*requires_desktop(), pytest.mark.gui_full, pytest.mark.timeout(1200)]
SEED = 1  # the first held-out draw of each family: its words all reach the OCR text view (checked when written: with
# the variants, seed 0's delete-file draw has a file name tesseract drops from the list, as the benchmark's check finds)


@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    out = tmp_path_factory.mktemp("gui-families")
    write_families(out, train_instances=1, heldout_instances=1, seed=SEED)
    tasks = [t for t in load_tasks(out / "tasks") if t.id.endswith("-h000")]
    workdir = tmp_path_factory.mktemp("gui-family-desktops")
    return asyncio.run(check_tasks(tasks, str(workdir), concurrency=2, tasks_dir=out / "tasks"))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_family_solution_solves_its_instance_and_doing_nothing_does_not(checks, family):
    (c,) = [c for c in checks if family_of(c.task.key) == family]
    assert c.ok, c.line()
