"""terminal-rl/terminal_families.py: generated instances are reproducible, the splits disjoint, the tests pinned to
the data (the solution's run lives in tests/integration/test_terminal_families_solvable.py)."""
import json
import random
import re

import pytest

from slime.agentic.task_families import load_data_files
from terminal_families import (FAMILIES, HELDOUT_FAMILIES, TRAIN_FAMILIES, draw_instances, family_of,
                                             identity, write_families)
from slime.agentic.terminal.tasks import load_tasks


def _tree_bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_same_seed_writes_the_same_bytes_and_another_seed_other_tasks(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_families(a, train_instances=4, heldout_instances=2, seed=0)
    write_families(b, train_instances=4, heldout_instances=2, seed=0)
    write_families(c, train_instances=4, heldout_instances=2, seed=1)
    assert _tree_bytes(a) == _tree_bytes(b)
    assert (a / "heldout_instances.jsonl").read_text() != (c / "heldout_instances.jsonl").read_text()


def test_the_splits_are_disjoint_and_the_heldout_families_never_trained(tmp_path):
    counts = write_families(tmp_path, train_instances=6, heldout_instances=3, seed=0)
    assert counts == {"demos": 3 * len(TRAIN_FAMILIES), "rl": 3 * len(TRAIN_FAMILIES),
                      "heldout_instances": 3 * len(TRAIN_FAMILIES), "heldout_tasks": 3 * len(HELDOUT_FAMILIES)}
    data = load_data_files(tmp_path)
    names = {split: {r["task"]["task_name"] for r in rows} for split, rows in data.items()}
    splits = list(names)
    for i, x in enumerate(splits):
        for y in splits[i + 1:]:
            assert not names[x] & names[y], (x, y)
    trained = {family_of(n) for n in names["demos"] | names["rl"]}
    assert trained == {f.name for f in TRAIN_FAMILIES}
    assert {family_of(n) for n in names["heldout_tasks"]} == {f.name for f in HELDOUT_FAMILIES}
    assert not trained & {family_of(n) for n in names["heldout_tasks"]}
    # an unseen instance is never a training instance again (instruction and files)
    tasks = {t.name: t for t in load_tasks(tmp_path / "tasks")}
    def ident(name):
        return (tasks[name].instruction, (tasks[name].path / "setup.sh").read_text())
    assert not {ident(n) for n in names["heldout_instances"]} & {ident(n) for n in names["demos"] | names["rl"]}
    # every data line names a task folder that loads, with the family's instruction
    for rows in data.values():
        for row in rows:
            assert tasks[row["task"]["task_path"]].instruction == row["task"]["instruction"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_instances_vary_and_their_tests_pin_the_computed_answer(family):
    drawn = draw_instances(FAMILIES[family], 12, seed=0, exclude=set())
    assert len({identity(i) for _, i in drawn}) == 12
    # the draws differ in what the task is about, not only in the order of files
    assert len({json.dumps(i.files, sort_keys=True) for _, i in drawn}) >= 6
    for _, instance in drawn:
        assert instance.tests and instance.solution.strip()
        for body in instance.tests.values():
            compile(body, family, "exec")


@pytest.mark.parametrize("family", [f.name for f in TRAIN_FAMILIES])
def test_training_families_ask_their_task_in_several_ways(family):
    # one template per family would be learnt by heart from the demonstrations; the variants need other commands
    drawn = draw_instances(FAMILIES[family], 40, seed=0, exclude=set())
    by_variant = {}
    for _, instance in drawn:
        # the solution's shape: what is left when the names and numbers the instruction gives are blanked out
        given = set(re.findall(r"[A-Za-z0-9_]+", instance.instruction))
        shape = re.sub(r"[A-Za-z0-9_]+", lambda m: "_" if m.group() in given else m.group(), instance.solution)
        by_variant.setdefault(instance.variant, set()).add(shape)
    assert len(by_variant) >= 4, sorted(by_variant)
    assert "" not in by_variant
    # different variants are solved by different commands, not the same command with other names
    variants = sorted(by_variant)
    for i, a in enumerate(variants):
        for b in variants[i + 1:]:
            assert not by_variant[a] & by_variant[b], (a, b, by_variant[a] & by_variant[b])


def test_the_variant_is_recorded_in_the_task_and_the_data(tmp_path):
    write_families(tmp_path, train_instances=2, heldout_instances=1, seed=0)
    row = load_data_files(tmp_path)["demos"][0]["task"]
    assert row["variant"]
    meta = (tmp_path / "tasks" / row["task_path"] / "task.yaml").read_text()
    assert f"variant: {row['variant']}" in meta


def test_exclusion_redraws(tmp_path):
    family = TRAIN_FAMILIES[0]
    first = draw_instances(family, 5, seed=3, exclude=set())
    again = draw_instances(family, 5, seed=3, exclude={identity(i) for _, i in first[:2]})
    assert [identity(i) for _, i in again[:3]] == [identity(i) for _, i in first[2:]]


def test_family_of_reads_task_keys_and_folder_names():
    assert family_of("count-level-lines-t003:count-level-lines-t003") == "count-level-lines"
    assert family_of("max-row-h012") == "max-row"
    assert family_of("count-error-lines") == "count-error-lines"  # a shipped task: its own name


def test_draws_are_independent_of_global_random_state():
    random.seed(123)
    a = draw_instances(FAMILIES["max-row"], 3, seed=0, exclude=set())
    random.seed(456)
    b = draw_instances(FAMILIES["max-row"], 3, seed=0, exclude=set())
    assert [identity(i) for _, i in a] == [identity(i) for _, i in b]
