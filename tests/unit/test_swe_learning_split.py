"""bench/swe_learning.py: the split of the shipped instances (no instance in two sets, a whole project held out) and
the step-level signals of an evaluation."""
import json
import sys
from pathlib import Path

# after the method folders: bench/personalization.py must not shadow openclaw-test/personalization/
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
import swe_learning as sl  # noqa: E402

from slime.agentic.swe.instances import load_instances  # noqa: E402
from slime.agentic.swe.provider import DEFAULT_INSTANCES  # noqa: E402


def test_the_split_holds_out_a_project_and_instances_of_every_other(tmp_path):
    counts = sl.write_families(tmp_path, 0, 0.5, 2, 0)
    assert counts == {"demos": 29, "rl": 29, "heldout_instances": 10, "heldout_tasks": 8}
    ids = {name: [json.loads(line)["metadata"]["instance"]["instance_id"]
                  for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()] for name in counts}
    assert ids["demos"] == ids["rl"]
    train, unseen, project = set(ids["demos"]), set(ids["heldout_instances"]), set(ids["heldout_tasks"])
    assert not train & unseen and not train & project and not unseen & project
    assert {sl.project_of(i) for i in project} == {sl.HELDOUT_PROJECT}
    assert sl.HELDOUT_PROJECT not in {sl.project_of(i) for i in train | unseen}
    assert {sl.project_of(i) for i in unseen} == {sl.project_of(i) for i in train}  # two of each trained project
    assert len(train | unseen | project) == len(load_instances(DEFAULT_INSTANCES))


def test_signals_read_the_episode_rows():
    inst = load_instances(DEFAULT_INSTANCES)[0]
    gold_file = "toolz/itertoolz.py"
    rows = [{"task": inst.instance_id, "exit_status": "submitted", "tests_ran": True, "patch_files": [gold_file],
             "format_errors": 1, "evaluation": {"outcomes": {t: "passed" for t in inst.FAIL_TO_PASS}}},
            {"task": inst.instance_id, "exit_status": "max_steps", "tests_ran": False, "patch_files": ["README"],
             "format_errors": 3, "evaluation": {"outcomes": {}}}]
    assert sl.signals(rows) == {"submitted": 0.5, "tests_ran": 0.5, "right_file": 0.5, "f2p_passed": 0.5,
                                "format_errors": 2.0}
    assert sl.project_of("pytoolz__toolz-3") == "pytoolz/toolz"
