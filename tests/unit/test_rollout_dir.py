"""Rollout directories: batches from files, each turn trained once across files and restarts, one trainer."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from slime.conversation.rollout_dir import LEDGER, RolloutDirDataSource, read_rollout_files
from slime.utils.types import Sample


def _write(folder, name, turn_ids):
    lines = []
    for t in turn_ids:
        sample = Sample(index=t, tokens=[1, 2, 3], response_length=1, reward={"score": 1.0}).to_dict()
        lines.append(json.dumps({"turn_id": t, "session_id": "s", "turn": t, "sample": sample}))
    (folder / name).write_text("\n".join(lines) + "\n")


def test_batches_come_oldest_file_first_and_each_turn_once(tmp_path):
    _write(tmp_path, "rollout_20260101T000000_1.jsonl", [1, 2, 3])
    _write(tmp_path, "rollout_20260101T000001_2.jsonl", [3, 4])  # turn 3 again: a collector crashed mid-way
    source = RolloutDirDataSource(SimpleNamespace(rollout_dir=str(tmp_path)))
    try:
        assert [s.index for s in source.claim(0, 2)] == [1, 2]
        assert [s.index for s in source.claim(1, 2)] == [3, 4]
        _write(tmp_path, "rollout_20260101T000002_3.jsonl", [5, 6])  # a file written while training: picked up
        assert [s.index for s in source.claim(2, 2)] == [5, 6]
        assert sorted(source._parsed) == sorted(p.name for p in tmp_path.glob("rollout_*.jsonl"))  # each parsed once
        source.mark_trained(0)
        with pytest.raises(RuntimeError, match="another trainer is training from"):
            RolloutDirDataSource(SimpleNamespace(rollout_dir=str(tmp_path)))
    finally:
        source.close()
    # restart: batch 1 never finished, so turns 3 and 4 come again; 1 and 2 do not
    with open(tmp_path / LEDGER, "a") as fh:
        fh.write('{"rollout_id": 9, "turn_ids": [')  # a torn line from a crash: ignored
    again = RolloutDirDataSource(SimpleNamespace(rollout_dir=str(tmp_path)))
    try:
        assert again.trained == {1, 2}
        assert [s.index for s in again.claim(0, 2)] == [3, 4]
        again.add_samples([[Sample(index=3)], [Sample(index=4)]])  # handed back: available again
        assert again.metrics()["rollout/pending_samples"] == 4  # 3, 4 and the new file's 5, 6
    finally:
        again.close()


def test_a_bad_rollout_file_is_named(tmp_path):
    (tmp_path / "rollout_x.jsonl").write_text('{"turn_id": 1}\n')
    with pytest.raises(ValueError, match=r"rollout_x.jsonl:1: not a rollout row"):
        read_rollout_files(tmp_path)
