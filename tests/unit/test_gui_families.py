"""slime.agentic.gui.families: generated desktop tasks load as OSWorld-format tasks with a scripted solution, are
reproducible, and their splits are disjoint (the solutions run on real desktops in
tests/integration/test_gui_families_solvable.py)."""
import json

import pytest

from slime.agentic.gui.families import (FAMILIES, HELDOUT_FAMILIES, TRAIN_FAMILIES, draw_instances, family_of,
                                        identity, write_families)
from slime.agentic.gui.scripted import load_solution
from slime.agentic.gui.tasks import load_tasks


def _bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_written_tasks_load_with_their_solutions_and_the_same_seed_writes_the_same_bytes(tmp_path):
    counts = write_families(tmp_path / "a", train_instances=4, heldout_instances=2, seed=0)
    write_families(tmp_path / "b", train_instances=4, heldout_instances=2, seed=0)
    assert _bytes(tmp_path / "a") == _bytes(tmp_path / "b")
    assert counts == {"demos": 2 * len(TRAIN_FAMILIES), "rl": 2 * len(TRAIN_FAMILIES),
                      "heldout_instances": 2 * len(TRAIN_FAMILIES), "heldout_tasks": 2 * len(HELDOUT_FAMILIES)}
    tasks = {t.key: t for t in load_tasks(tmp_path / "a" / "tasks")}
    assert len(tasks) == sum(counts.values())
    for task in tasks.values():
        steps = load_solution(task)
        assert steps[-1] == {"action": "terminate", "status": "success"}
    names = {}
    for split in counts:
        rows = [json.loads(line) for line in (tmp_path / "a" / f"{split}.jsonl").read_text().splitlines()]
        names[split] = {r["prompt"] for r in rows}
        for row in rows:
            assert row["metadata"]["instruction"] == tasks[row["prompt"]].instruction
    assert not names["demos"] & names["rl"] and not (names["demos"] | names["rl"]) & names["heldout_instances"]
    trained = {family_of(k) for k in names["demos"] | names["rl"]}
    assert trained == {f.name for f in TRAIN_FAMILIES}
    assert not trained & {family_of(k) for k in names["heldout_tasks"]}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_instances_vary_and_the_expected_state_follows_the_draw(name):
    drawn = draw_instances(FAMILIES[name], 10, seed=0, exclude=set())
    assert len({identity(i) for i in drawn}) == 10
    assert len({json.dumps(i.evaluator, sort_keys=True) for i in drawn}) >= 5
    for instance in drawn:
        typed = [s["text"] for s in instance.steps if s["action"] == "type"]
        expected = json.dumps(instance.evaluator)
        for text in typed:  # whatever the solution types ends up in the expected state
            assert text in expected or text == "archive", (text, expected)


def test_file_names_in_a_folder_have_distinct_stems():
    for instance in draw_instances(FAMILIES["delete-file"], 30, seed=3, exclude=set()):
        names = [f["path"].rsplit("/", 1)[1] for f in instance.config[0]["parameters"]["files"]]
        stems = [n.rsplit(".", 1)[0] for n in names]
        assert len(set(stems)) == len(stems)
