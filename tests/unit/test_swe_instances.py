"""The SWE-bench instance format: both encodings of the test lists, upstream's training-data shape, JSONL that
round-trips byte for byte, and errors that name the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slime.agentic.swe.instances import (
    InstanceFormatError,
    SweInstance,
    as_training_row,
    dumps_instance,
    instance_from_dict,
    load_instances,
    save_instances,
)

REPO_INSTANCES = Path(__file__).resolve().parents[2] / "swe-rl" / "data" / "instances.jsonl"

ROW = {
    "instance_id": "pytoolz__toolz-1",
    "repo": "pytoolz/toolz",
    "base_commit": "b493352ab0d0760fd4fb1502e8123c9d51dca5dd",
    "problem_statement": "`merge_sorted` raises IndexError\n",
    "FAIL_TO_PASS": ["toolz/tests/test_itertoolz.py::test_merge_sorted"],
    "PASS_TO_PASS": ["toolz/tests/test_itertoolz.py::test_cons", "toolz/tests/test_itertoolz.py::test_count"],
    "test_patch": "diff --git a/t b/t\n",
    "patch": "diff --git a/s b/s\n",
    "version": "1.2.0",
}


def write_lines(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_lists_and_json_string_lists_give_the_same_instance():
    as_lists = instance_from_dict(ROW)
    # SWE-bench Lite / SWE-Gym rows: the two lists are JSON strings
    as_strings = instance_from_dict({**ROW, "FAIL_TO_PASS": json.dumps(ROW["FAIL_TO_PASS"]),
                                     "PASS_TO_PASS": json.dumps(ROW["PASS_TO_PASS"])})
    assert as_lists == as_strings
    assert as_lists.FAIL_TO_PASS == ("toolz/tests/test_itertoolz.py::test_merge_sorted",)
    assert as_lists.tests == as_lists.FAIL_TO_PASS + as_lists.PASS_TO_PASS


def test_upstream_training_shape_reads_metadata_instance():
    row = {"text": ROW["problem_statement"], "metadata": {"instance": ROW, "data_source": "SumanthRH/SWE-Gym-Subset"}}
    assert instance_from_dict(row) == instance_from_dict(ROW)
    # and back: as_training_row writes that shape
    again = as_training_row(instance_from_dict(ROW))
    assert again["text"] == ROW["problem_statement"]
    assert instance_from_dict(again) == instance_from_dict(ROW)


def test_unknown_keys_are_kept_in_extra_and_written_back():
    inst = instance_from_dict({**ROW, "eval_script": "pytest -x", "image_name": "sweb.eval.x86_64.a"})
    assert inst.extra == {"eval_script": "pytest -x"}
    assert inst.image_name == "sweb.eval.x86_64.a"
    assert inst.to_dict()["eval_script"] == "pytest -x"


def test_numeric_version_is_read_as_text():
    assert instance_from_dict({**ROW, "version": 3.0}).version == "3.0"


def test_jsonl_round_trip_is_byte_identical(tmp_path):
    rows = [ROW, {**ROW, "instance_id": "pytoolz__toolz-2", "hints_text": "", "problem_statement": "naïve – unicode\n"}]
    src = write_lines(tmp_path / "in.jsonl", rows)
    first = tmp_path / "a.jsonl"
    save_instances(first, load_instances(src))
    second = tmp_path / "b.jsonl"
    save_instances(second, load_instances(first))
    assert first.read_bytes() == second.read_bytes()
    assert "naïve" in first.read_text(encoding="utf-8")  # non-ASCII kept as is
    assert dumps_instance(load_instances(first)[0]) == first.read_text().splitlines()[0]


def test_blank_lines_skipped_and_ids_selected(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", [ROW, "", {**ROW, "instance_id": "b"}])
    assert [i.instance_id for i in load_instances(src)] == ["pytoolz__toolz-1", "b"]
    assert [i.instance_id for i in load_instances(src, ["b"])] == ["b"]
    with pytest.raises(KeyError, match="'nope'"):
        load_instances(src, ["nope"])


@pytest.mark.parametrize("change, field", [
    ({"FAIL_TO_PASS": None}, "FAIL_TO_PASS"),
    ({"PASS_TO_PASS": "[not json"}, "PASS_TO_PASS"),
    ({"PASS_TO_PASS": "[1, 2]"}, "PASS_TO_PASS"),
    ({"FAIL_TO_PASS": [""]}, "FAIL_TO_PASS"),
    ({"patch": 12}, "patch"),
    ({"repo": "  "}, "repo"),
    ({"version": True}, "version"),
])
def test_malformed_fields_name_the_line_and_the_field(tmp_path, change, field):
    src = write_lines(tmp_path / "bad.jsonl", [ROW, {**ROW, "instance_id": "x", **change}])
    with pytest.raises(InstanceFormatError) as err:
        load_instances(src)
    assert f"bad.jsonl:2" in str(err.value) and repr(field) in str(err.value)


def test_missing_field_and_bad_json_and_duplicates(tmp_path):
    row = dict(ROW)
    del row["base_commit"]
    with pytest.raises(InstanceFormatError, match=r"in.jsonl:1: missing field 'base_commit'"):
        load_instances(write_lines(tmp_path / "in.jsonl", [row]))
    with pytest.raises(InstanceFormatError, match=r"j.jsonl:2: not valid JSON"):
        load_instances(write_lines(tmp_path / "j.jsonl", [ROW, "{oops"]))
    with pytest.raises(InstanceFormatError, match=r"d.jsonl:2: field 'instance_id'.*line 1"):
        load_instances(write_lines(tmp_path / "d.jsonl", [ROW, ROW]))
    with pytest.raises(InstanceFormatError, match="must be a JSON object"):
        instance_from_dict(["not", "a", "row"])
    with pytest.raises(InstanceFormatError, match="metadata.instance"):
        instance_from_dict({"text": "x", "metadata": {"instance": "nope"}})


def test_instances_are_frozen():
    inst = instance_from_dict(ROW)
    assert isinstance(inst, SweInstance)
    with pytest.raises(AttributeError):
        inst.patch = ""


def test_the_training_rows_cli_writes_upstreams_shape_for_the_chosen_instances(tmp_path):
    from slime.agentic.swe import instances as mod

    shipped = mod.load_instances(REPO_INSTANCES)
    out = tmp_path / "train.jsonl"
    wanted = [shipped[1].instance_id, shipped[0].instance_id]
    assert mod.main(["--out", str(out), *wanted]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["metadata"]["instance"]["instance_id"] for r in rows] == wanted
    assert rows[0]["text"] == shipped[1].problem_statement
    assert mod.instance_from_dict(rows[0]) == shipped[1]  # the loader reads the shape back


def test_an_instance_that_lists_no_test_is_not_resolved_and_runs_nothing(monkeypatch):
    """pytest without node ids would run the project's whole suite: the evaluation stops before any checkout."""
    import asyncio
    from dataclasses import replace

    from slime.agentic.swe import evaluate

    def no_checkout(*args, **kwargs):
        raise AssertionError("an instance without tests must not be checked out")

    monkeypatch.setattr(evaluate.repos, "checkout", no_checkout)
    empty = replace(load_instances(REPO_INSTANCES)[0], FAIL_TO_PASS=(), PASS_TO_PASS=())
    result = asyncio.run(evaluate.run_instance(empty, empty.patch))
    assert not result.resolved and result.reason == "the instance lists no test" and result.outcomes == {}
