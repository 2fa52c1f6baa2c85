"""bench/train_stages.py: a reused benchmark stage must have been run with this run's settings."""
import sys
from pathlib import Path

import pytest

# after the method folders: bench/personalization.py must not shadow openclaw-test/personalization/
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
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


def test_run_stage_echoes_step_lines_with_an_eta_and_appends_to_its_log(tmp_path, capsys):
    from train_stages import run_stage

    script = tmp_path / "stage.sh"
    script.write_text('for i in 1 2 3 4; do echo "step $i/4 | loss +0.1"; done\n'
                      'echo "[t] slime.rollout.default_rollout: eval heldout: 3/9 samples done, 0.1 min"\n'
                      'echo "noise that is not echoed"\n')
    log = tmp_path / "stage.log"
    log.write_text("an earlier part\n")
    run_stage("x", str(script), {}, [], log)
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if line.startswith("[x] step ")]
    assert len(steps) == 4 and all("ETA" in line for line in steps)
    assert steps[-1].endswith("ETA 0.0 min")
    assert "[x] [t] slime.rollout.default_rollout: eval heldout: 3/9 samples done" in out
    assert "noise" not in out
    assert log.read_text().startswith("an earlier part\nstep 1/4")


def test_a_resumed_stage_estimates_from_the_steps_it_ran_itself():
    from train_stages import eta_seconds

    # continued from a checkpoint: its first step line is step 49 of 140, 60 s after the stage started
    assert eta_seconds(0.0, (49, 60.0), 49, 140, 60.0) == 91 * 60.0  # not 60 s / 49 a step
    assert eta_seconds(0.0, (49, 60.0), 51, 140, 160.0) == 89 * 50.0  # then the rate of the steps since


def test_an_evaluation_logs_its_progress_with_an_eta(caplog):
    import logging

    from slime.rollout.default_rollout import EvalProgress

    progress = EvalProgress("heldout", 4, every=0.0)
    with caplog.at_level(logging.INFO, logger="slime.rollout.default_rollout"):
        progress.done(1)
        progress.done(3)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("eval heldout: 1/4 samples done") and "ETA" in lines[0]
    assert lines[-1].startswith("eval heldout: 4/4 samples done") and lines[-1].endswith("ETA 0.0 min")
