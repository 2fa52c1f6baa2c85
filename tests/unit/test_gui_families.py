"""gui-rl/gui_families.py: generated desktop tasks load as OSWorld-format tasks with a scripted solution, are
reproducible, and their splits are disjoint (the solutions run on real desktops in
tests/integration/test_gui_families_solvable.py)."""
import json

import pytest

from gui_families import (FAMILIES, HELDOUT_FAMILIES, TRAIN_FAMILIES, draw_instances, family_of,
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


def _shape(instance) -> tuple:
    """A solution abstracted to what a template would fix: the actions in order, and for each typed text or click
    target whether it is copied from the instruction or has to be worked out from the screen."""
    def source(text: str) -> str:
        return "copied" if text.lower().rstrip("/") in instance.instruction.lower() else "worked out"
    return tuple((s["action"], tuple(s.get("keys", ())), source(s["text"]) if "text" in s else "",
                  source(s["target"]) if "target" in s else "") for s in instance.steps)


@pytest.mark.parametrize("family", TRAIN_FAMILIES, ids=lambda f: f.name)
def test_training_families_have_variants_that_one_template_does_not_solve(family):
    drawn = draw_instances(family, 60, seed=0, exclude=set())
    shapes: dict[str, set] = {}
    for instance in drawn:
        shapes.setdefault(instance.variant, set()).add(_shape(instance))
    assert len(shapes) >= 3, sorted(shapes)
    assert len(set().union(*shapes.values())) >= 2  # not one action sequence with other words
    # some variant needs a value that is not in its instruction (the current size, the name already there, the n-th
    # line, the only PDF): copying the instruction's words does not solve the family
    assert any("worked out" in step for shape in set().union(*shapes.values()) for step in shape), family.name


def test_held_out_families_are_not_variants_of_training_families():
    assert not {f.name for f in TRAIN_FAMILIES} & {f.name for f in HELDOUT_FAMILIES}
    for family in HELDOUT_FAMILIES:
        assert {i.variant for i in draw_instances(family, 5, seed=0, exclude=set())} == {""}
