"""bench/train_stages.py: a reused benchmark stage must have been run with this run's settings."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from train_stages import check_stage_settings, record_stage_settings  # noqa: E402

SETTINGS = {"model": "smollm2", "sft_steps": 32, "sft_lr": 5e-5, "eval_samples": 2, "max_steps": 8}


def test_the_same_settings_are_accepted(tmp_path):
    record_stage_settings(tmp_path, SETTINGS)
    check_stage_settings(tmp_path, dict(SETTINGS), "--reuse-sft")


def test_other_settings_are_refused_naming_what_differs(tmp_path):
    record_stage_settings(tmp_path, SETTINGS)
    with pytest.raises(SystemExit, match=r"--reuse-sft: .*model 'smollm2' there, 'tiny' now, sft_lr 5e-05 there, 0.0001 now"):
        check_stage_settings(tmp_path, {**SETTINGS, "model": "tiny", "sft_lr": 1e-4}, "--reuse-sft")


def test_a_stage_without_recorded_settings_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="stage_settings.json is missing"):
        check_stage_settings(tmp_path, SETTINGS, "--reuse-sft")
