"""bench/learning_protocol.py: run files -> episodes -> the table and the RESULT line, from plain or committed
(compressed) files; a finished stage is reused only with the same settings."""
import gzip
import json
import sys
from pathlib import Path

import pytest

# after the method folders: bench/personalization.py must not shadow openclaw-test/personalization/
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
import learning_protocol as lp  # noqa: E402


def _sample(task, index, turn, accuracy, text):
    return {"group_index": index, "index": index, "response": text,
            "metadata": {"task_key": f"{task}:{task}", "turn_idx": turn, "accuracy": accuracy, "status": "completed"}}


def _dump(path: Path, samples):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))


def family(key):
    return key.split(":")[0].rsplit("-", 1)[0]


def test_episodes_are_grouped_from_turn_samples_in_turn_order(tmp_path):
    path = tmp_path / "instances.jsonl"
    _dump(path, [_sample("sum-h000", 0, 1, 1.0, "answer"), _sample("sum-h000", 0, 0, 1.0, "call"),
                 _sample("grep-h000", 1, 0, 0.0, "prose")])
    rows = lp.episode_rows(path, family)
    assert len(rows) == 2
    first = next(r for r in rows if r["task"] == "sum-h000")
    assert first["family"] == "sum" and [t["text"] for t in first["turns"]] == ["call", "answer"]


def _write_policy(out: Path, policy: str, solved: dict[str, list[float]]):
    for set_name, accs in solved.items():
        rows = [{"task": f"f{i % 2}-h{i:03d}", "family": f"f{i % 2}", "accuracy": a, "status": "completed",
                 "evaluation": None, "turns": []} for i, a in enumerate(accs)]
        (out / f"eval_{policy}_{set_name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_result_is_rl_minus_warm_start_on_unseen_instances_and_recomputes_from_committed_files(
        tmp_path, capsys, monkeypatch):
    _write_policy(tmp_path, "base", {"instances": [0, 0, 0, 0], "tasks": [0, 0]})
    _write_policy(tmp_path, "warm", {"instances": [1, 0, 0, 0], "tasks": [1, 0]})
    _write_policy(tmp_path, "rl", {"instances": [1, 1, 1, 0], "tasks": [0, 0]})
    gain = lp.report(tmp_path, {"sft": 10.0}, "x_learning", 0.1)
    out = capsys.readouterr().out
    assert gain == pytest.approx(0.5)
    assert out.strip().endswith("RESULT x_learning value=0.500 target=>=0.1 PASS")
    assert "unseen tasks: base 0.000, warm start 0.500, after RL 0.000" in out
    (tmp_path / "result.json").write_text("{}")
    monkeypatch.setattr(lp, "REPO", tmp_path / "repo")
    dest = lp.commit_results(tmp_path, "x_learning", "org/model")
    assert dest == tmp_path / "repo" / "bench" / "results" / "x_learning" / "org_model"
    assert sorted(p.name for p in dest.glob("eval_*.jsonl.gz")) == [
        f"eval_{p}_{s}.jsonl.gz" for p in ("base", "rl", "warm") for s in ("instances", "tasks")]
    assert lp.report(dest, {}, "x_learning", 0.6) == pytest.approx(0.5)  # from the .gz files alone
    assert capsys.readouterr().out.strip().endswith("value=0.500 target=>=0.6 FAIL")


def test_rl_training_episodes_are_committed_compact_in_rollout_order(tmp_path, monkeypatch):
    rollouts = tmp_path / "rl" / lp.ROLLOUTS
    rollouts.mkdir(parents=True)
    for rollout in (10, 2):  # numeric order, not the files' names' order
        (rollouts / f"rollout_{rollout}.jsonl").write_text(json.dumps(
            {"index": rollout, "response": "Action: click", "reward": 1.0, "tokens": [1, 2, 3],
             "rollout_log_probs": [-0.1], "prompt": "a long observation" if rollout == 2 else {"task_name": "t1"}})
            + "\n\n")
    monkeypatch.setattr(lp, "REPO", tmp_path / "repo")
    dest = lp.commit_results(tmp_path, "x_learning", "org/model")
    committed = [json.loads(line) for line in gzip.decompress((dest / "rl_rollouts.jsonl.gz").read_bytes()).splitlines()]
    assert committed == [{"rollout": 2, "index": 2, "response": "Action: click", "reward": 1.0},
                         {"rollout": 10, "index": 10, "response": "Action: click", "reward": 1.0,
                          "prompt": {"task_name": "t1"}}]  # a task record is kept, a chat prompt is not


def test_a_run_stopped_before_rl_prints_its_table_and_no_result(tmp_path, capsys):
    _write_policy(tmp_path, "base", {"instances": [0, 0], "tasks": [0]})
    _write_policy(tmp_path, "warm", {"instances": [1, 0], "tasks": [1]})
    with pytest.raises(SystemExit, match="for after RL: the run is not finished"):
        lp.report(tmp_path, {}, "x_learning", 0.1)
    out = capsys.readouterr().out
    assert "warm start  instances         2    0.500" in out and "RESULT" not in out


def test_a_finished_stage_is_reused_only_with_resume_and_the_same_settings(tmp_path):
    from train_stages import record_stage_settings

    assert not lp.stage_done(tmp_path, {"a": 1}, resume=True)  # unfinished: run it
    record_stage_settings(tmp_path, {"a": 1})
    assert not lp.stage_done(tmp_path, {"a": 1}, resume=False)
    assert lp.stage_done(tmp_path, {"a": 1}, resume=True)
    with pytest.raises(SystemExit, match="a 1 there, 2 now"):
        lp.stage_done(tmp_path, {"a": 2}, resume=True)


def test_evaluations_must_hold_every_set(tmp_path):
    _dump(tmp_path / "eval" / "before_training" / "instances.jsonl", [])
    _dump(tmp_path / "eval" / "before_training" / "tasks.jsonl", [])
    _dump(tmp_path / "eval" / "rollout_000003" / "instances.jsonl", [])
    with pytest.raises(SystemExit, match="expected 2 evaluation"):
        lp.evaluations(tmp_path, 2)
    _dump(tmp_path / "eval" / "rollout_000003" / "tasks.jsonl", [])
    before, after = lp.evaluations(tmp_path, 2)
    assert before["tasks"].parent.name == "before_training" and after["instances"].parent.name == "rollout_000003"


def test_lora_flags_and_the_adapter_or_full_model_of_a_checkpoint(tmp_path):
    class Opts:
        lora_rank = 8
        lora_top_layers = 0
    assert lp.lora_flags(Opts) == ["--use-lora", "--lora-rank", "8", "--lora-alpha", "16"]
    Opts.lora_top_layers = 6
    assert lp.lora_flags(Opts)[-2:] == ["--lora-top-layers", "6"]
    Opts.lora_rank = 0
    assert lp.lora_flags(Opts) == []
    for it, name in (("iter_0000001", "config.json"), ("iter_0000002", "adapter_config.json")):
        (tmp_path / it / "model").mkdir(parents=True)
        (tmp_path / it / "model" / name).write_text("{}")
    assert lp.adapter_or_model(tmp_path) == tmp_path / "iter_0000002" / "model"
    with pytest.raises(SystemExit, match="no checkpoint"):
        lp.adapter_or_model(tmp_path / "none")


def test_a_setting_names_its_key_field_and_keeps_more_metadata_per_episode(tmp_path):
    # SWE step samples name their instance in `instance_id` and order by `step`
    path = tmp_path / "instances.jsonl"
    meta = {"accuracy": 0.0, "status": "truncated", "exit_status": "max_steps", "tests_ran": True}
    _dump(path, [{"group_index": 0, "index": 0, "response": "second", "metadata": {**meta, "instance_id": "a__b-1",
                                                                                   "step": 1}},
                 {"group_index": 0, "index": 0, "response": "first", "metadata": {**meta, "instance_id": "a__b-1",
                                                                                  "step": 0}}])
    (row,) = lp.episode_rows(path, lambda key: "a/b", "instance_id", ("exit_status", "tests_ran"))
    assert row["task"] == "a__b-1" and row["family"] == "a/b"
    assert [t["text"] for t in row["turns"]] == ["first", "second"]
    assert row["exit_status"] == "max_steps" and row["tests_ran"] is True


def test_step_level_signals_are_reported_per_policy_and_set(tmp_path, capsys):
    for policy in ("base", "warm", "rl"):
        _write_policy(tmp_path, policy, {"instances": [0, 1], "tasks": [0]})
    lp.report(tmp_path, {}, "x_learning", 0.05, signals=lambda rows: {"episodes_seen": float(len(rows))})
    out = capsys.readouterr().out
    assert out.count("signals: episodes_seen 2.000") == 3 and out.count("signals: episodes_seen 1.000") == 3
    assert lp.summaries(tmp_path, lambda rows: {"n": 1.0})["rl"]["tasks"]["signals"] == {"n": 1.0}


def test_rl_flags_and_settings_carry_the_constant_groups_choice():
    import argparse

    parser = argparse.ArgumentParser()
    lp.add_arguments(parser, "demo_learning", {})
    opts = parser.parse_args([])
    assert opts.constant_groups == "keep"
    flags = lp.rl_flags(opts)
    assert flags[flags.index("--constant-groups") + 1] == "keep"
    assert flags[flags.index("--eval-interval") + 1] == str(opts.rl_rollouts)
    # the default is not recorded: a run from before the flag still resumes
    assert "constant_groups" not in lp.rl_stage_settings({"model": "m"}, opts)
    opts = parser.parse_args(["--constant-groups", "drop", "--rl-rollouts", "8"])
    flags = lp.rl_flags(opts)
    assert flags[flags.index("--constant-groups") + 1] == "drop" and flags[flags.index("--eval-interval") + 1] == "8"
    settings = lp.rl_stage_settings({"model": "m"}, opts)
    assert settings["constant_groups"] == "drop" and settings["model"] == "m" and settings["rl_rollouts"] == 8


def test_temperature_reaches_evaluations_and_rollouts_and_is_recorded_only_when_set(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    lp.add_arguments(parser, "demo_learning", {})
    opts = parser.parse_args([])
    assert opts.temperature == 1.0 and "temperature" not in lp.rl_stage_settings({"seed": 0}, opts)
    opts = parser.parse_args(["--temperature", "0.5"])
    # the warm start trains the same at any temperature: its stage is reused, its evaluations are run again
    assert "temperature" not in lp.sft_stage_settings({"seed": 0}, opts)
    flags = lp.eval_flags(opts, tmp_path)
    assert flags[flags.index("--eval-temperature") + 1] == "0.5"
    rl = lp.rl_flags(opts)
    assert rl[rl.index("--rollout-temperature") + 1] == "0.5"
    settings = lp.rl_stage_settings(lp.sft_stage_settings({"seed": 0}, opts), opts)
    assert settings["temperature"] == 0.5 and settings["seed"] == 0
    with pytest.raises(SystemExit):  # greedy RL would sample one outcome per group
        parser.parse_args(["--temperature", "0"])


def test_rerun_rl_sets_the_rl_stage_aside_and_keeps_the_warm_start(tmp_path):
    old, new = {"model": "m", "temperature": 0.7}, {"model": "m", "temperature": 0.7, "rollout_temperature": 1.0}
    assert lp.rerun_rl(tmp_path, new) is None  # no RL stage yet: nothing to set aside
    (tmp_path / "rl" / "ckpt" / "iter_0000008").mkdir(parents=True)
    lp.record_stage_settings(tmp_path / "rl", old)
    (tmp_path / "sft" / "ckpt" / "iter_0000140").mkdir(parents=True)
    for name in ("rl.log", "result.json", "eval_rl_instances.jsonl", "eval_warm_instances.jsonl",
                 "eval_warm_t0.7.log", "eval_base_tasks.jsonl"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "timings.json").write_text(json.dumps({"sft": 100.0, "rl": 300.0}))
    assert lp.rerun_rl(tmp_path, old) is None  # the same settings: nothing to run again
    assert lp.rerun_rl(tmp_path, new) == tmp_path / "superseded_rl1"
    aside = tmp_path / "superseded_rl1"
    assert sorted(p.name for p in aside.iterdir()) == ["eval_rl_instances.jsonl", "result.json", "rl", "rl.log",
                                                       "timings.json"]
    # the warm start, its evaluation and the base model's stay; the old RL time goes with its stage
    assert (tmp_path / "sft" / "ckpt" / "iter_0000140").is_dir() and (tmp_path / "eval_warm_t0.7.log").is_file()
    assert (tmp_path / "eval_warm_instances.jsonl").is_file() and (tmp_path / "eval_base_tasks.jsonl").is_file()
    assert json.loads((tmp_path / "timings.json").read_text()) == {"sft": 100.0}
    assert json.loads((aside / "timings.json").read_text()) == {"rl": 300.0}
    # the rerun interrupted: the same command continues it, another one sets it aside in the next free folder
    (tmp_path / "rl").mkdir()
    lp.record_stage_settings(tmp_path / "rl", new, lp.STAGE_STARTED)
    assert lp.rerun_rl(tmp_path, new) is None and (tmp_path / "rl").is_dir()
    assert lp.rerun_rl(tmp_path, {**new, "lr": 1e-5}) == tmp_path / "superseded_rl2"


def test_a_rerun_rl_run_times_only_its_own_rl_stage_and_refuses_without_resume(tmp_path, monkeypatch):
    import argparse

    parser = argparse.ArgumentParser()
    lp.add_arguments(parser, "demo_learning", {})
    episode = [_sample("copy-1", 0, 0, 1.0, "done")]
    setting = lp.Setting(name="demo_learning", target=0.1, sft_script="sft.sh", rl_script="rl.sh",
                         write_families=None, demonstrate=None, stage_flags=lambda opts, families: [],
                         stage_env=lambda opts, families: {}, family_of=family)
    first = parser.parse_args(["--out", str(tmp_path), "--resume", "--model", "m"])
    # a kept run: families, demonstrations and warm start finished, an RL stage run with the default sampling
    family_settings = {"seed": 0, "train_instances": first.train_instances,
                       "heldout_instances": first.heldout_instances}
    sft_settings = lp.sft_stage_settings(family_settings, first)
    for stage, settings in (("families", family_settings), ("demos", family_settings), ("sft", sft_settings),
                            ("rl", lp.rl_stage_settings(sft_settings, first))):
        (tmp_path / stage).mkdir()
        lp.record_stage_settings(tmp_path / stage, settings)
    (tmp_path / "demos" / "sft_demos.jsonl").write_text("{}\n")
    (tmp_path / "sft" / "ckpt" / "iter_0000003" / "model").mkdir(parents=True)
    (tmp_path / "sft" / "ckpt" / "iter_0000003" / "model" / "config.json").write_text("{}")
    for folder in ("before_training", "rollout_000002"):
        for name in lp.SETS:
            _dump(tmp_path / "sft" / "eval" / folder / f"{name}.jsonl", episode)
    (tmp_path / "timings.json").write_text(json.dumps({"sft": 100.0, "rl": 300.0}))
    ran = []

    def fake_stage(tag, script, env, flags, log):  # the RL script: its evaluation after the last rollout
        ran.append((tag, flags))
        for name in lp.SETS:
            _dump(Path(env["RUN_DIR"]) / "eval" / "rollout_000007" / f"{name}.jsonl", episode)
        return 50.0

    monkeypatch.setattr(lp, "run_stage", fake_stage)
    rerun = parser.parse_args(["--out", str(tmp_path), "--model", "m", "--rerun-rl", "--rollout-temperature", "1.5"])
    with pytest.raises(SystemExit, match="give --resume too"):
        lp.run(setting, rerun)
    assert (tmp_path / "sft" / "ckpt").is_dir()  # refused before anything was removed
    rerun.resume = True
    assert lp.run(setting, rerun) == 0
    assert [tag for tag, _ in ran] == ["rl"] and "1.5" in ran[0][1]
    flags = ran[0][1]  # the trainer keeps the training episodes where commit_results looks for them
    assert flags[flags.index("--save-debug-rollout-data") + 1] == str(tmp_path / "rl" / lp.ROLLOUTS
                                                                      / "rollout_{rollout_id}.jsonl")
    # the set-aside stage's 300 s went with it: the RL time is this stage's alone, here and in result.json
    assert json.loads((tmp_path / "timings.json").read_text()) == {"sft": 100.0, "rl": 50.0}
    assert json.loads((tmp_path / "result.json").read_text())["timings"]["rl"] == 50.0
    assert json.loads((tmp_path / "superseded_rl1" / "timings.json").read_text()) == {"rl": 300.0}


def test_rl_may_sample_hotter_than_it_is_evaluated_and_keep_sampling_until_groups_contrast(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    lp.add_arguments(parser, "demo_learning", {})
    opts = parser.parse_args(["--temperature", "0.7"])
    rl = lp.rl_flags(opts)
    assert rl[rl.index("--rollout-temperature") + 1] == "0.7" and "--dynamic-sampling-filter-path" not in rl
    # the defaults are not recorded: a run from before the flags still resumes
    before = lp.rl_stage_settings({"seed": 0}, opts)
    assert "rollout_temperature" not in before and "rl_over_sampling" not in before
    opts = parser.parse_args(["--temperature", "0.7", "--rollout-temperature", "1.0", "--rl-over-sampling", "4"])
    flags = lp.eval_flags(opts, tmp_path)
    assert flags[flags.index("--eval-temperature") + 1] == "0.7"  # the evaluations stay comparable
    rl = lp.rl_flags(opts)
    assert rl[rl.index("--rollout-temperature") + 1] == "1.0"
    assert rl[rl.index("--over-sampling-batch-size") + 1] == "4"
    assert rl[rl.index("--dynamic-sampling-filter-path") + 1] == "slime.rollout.filter_hub.check_reward_nonzero_std"
    settings = lp.rl_stage_settings({"seed": 0}, opts)
    assert settings["rollout_temperature"] == 1.0 and settings["rl_over_sampling"] == 4
    # the warm start and its evaluations do not depend on how RL samples
    assert lp.sft_stage_settings({"seed": 0}, opts) == lp.sft_stage_settings(
        {"seed": 0}, parser.parse_args(["--temperature", "0.7"]))


def test_a_warm_start_evaluated_at_another_temperature_is_evaluated_again_not_retrained(tmp_path, monkeypatch):
    import argparse

    parser = argparse.ArgumentParser()
    lp.add_arguments(parser, "demo_learning", {})
    sft = tmp_path / "sft"
    _dump(sft / "eval" / "before_training" / "instances.jsonl", [])
    _dump(sft / "eval" / "before_training" / "tasks.jsonl", [])
    _dump(sft / "eval" / "rollout_000003" / "instances.jsonl", [])
    _dump(sft / "eval" / "rollout_000003" / "tasks.jsonl", [])
    opts = parser.parse_args(["--out", str(tmp_path)])
    # evaluated at the default (no record: a run from before the flag): its own evaluations are the policies'
    base, warm = lp.policy_evaluations(None, opts, sft, tmp_path / "warm", {}, [])
    assert base["instances"].parent.name == "before_training" and warm["tasks"].parent.name == "rollout_000003"
    ran = []

    def fake_stage(tag, script, env, flags, log):  # the eval-only run: its evaluation before training
        ran.append((env["HF_CKPT"], env["NUM_ROLLOUT"], flags[-6:]))
        for name in lp.SETS:
            _dump(Path(env["RUN_DIR"]) / "eval" / "before_training" / f"{name}.jsonl", [])
        return 1.0

    monkeypatch.setattr(lp, "run_stage", fake_stage)
    setting = lp.Setting(name="x", target=0.1, sft_script="sft.sh", rl_script="rl.sh", write_families=None,
                         demonstrate=None, stage_flags=None, stage_env=None, family_of=family)
    opts = parser.parse_args(["--out", str(tmp_path), "--temperature", "0.5", "--model", "base-model", "--resume"])
    base, warm = lp.policy_evaluations(setting, opts, sft, tmp_path / "warm", {}, [])
    assert [(m, n) for m, n, _ in ran] == [("base-model", "0"), (str(tmp_path / "warm"), "0")]
    assert ran[0][2] == lp.EVAL_ONLY
    assert base["instances"] == sft / "eval_t0.5" / "base" / "eval" / "before_training" / "instances.jsonl"
    assert warm["tasks"] == sft / "eval_t0.5" / "warm" / "eval" / "before_training" / "tasks.jsonl"
    lp.policy_evaluations(setting, opts, sft, tmp_path / "warm", {}, [])  # finished: reused with --resume
    assert len(ran) == 2
    lp.record_evaluated_at(sft, 0.5)  # a stage that ran at 0.5 itself: its own evaluations again
    assert lp.policy_evaluations(setting, opts, sft, tmp_path / "warm", {}, [])[0]["instances"] \
        == sft / "eval" / "before_training" / "instances.jsonl"


def test_an_unfinished_stage_continues_from_its_checkpoint_only_with_resume(tmp_path):
    stage = tmp_path / "rl"
    (stage / "ckpt" / "iter_0000004").mkdir(parents=True)
    assert lp.continue_flags(stage, resume=True) == ["--load", str(stage / "ckpt")]
    assert stage.is_dir()
    assert lp.continue_flags(stage, resume=False) == [] and not stage.exists()  # started again from empty
    (stage / "ckpt").mkdir(parents=True)  # interrupted before its first checkpoint
    assert lp.continue_flags(stage, resume=True) == [] and not stage.exists()


def test_an_interrupted_warm_start_keeps_its_evaluation_before_training(tmp_path):
    stage = tmp_path / "sft"
    before = stage / "eval" / "before_training"
    before.mkdir(parents=True)
    for name in lp.SETS:
        (before / f"{name}.jsonl").write_text("{}\n")
    (stage / "metrics.jsonl").write_text('{"step": 0, "eval/tasks/acc": 0.0}\n{"step": 1, "train/loss": 1.0}\n'
                                         '{"step": 2, "train/loss": 0.5}\n')
    assert lp.continue_flags(stage, resume=True, settings={"a": 1}, keep_first_eval=True) \
        == ["--skip-eval-before-train"]
    assert (stage / "metrics.jsonl").read_text() == '{"step": 0, "eval/tasks/acc": 0.0}\n'  # steps trained again
    assert all((before / f"{name}.jsonl").is_file() for name in lp.SETS)
    # the RL stage (no keep_first_eval) starts again from empty, recording what it was started with
    assert lp.continue_flags(stage, resume=True, settings={"a": 1}) == [] and not before.exists()
    assert json.loads((stage / lp.STAGE_STARTED).read_text()) == {"a": 1}


def test_a_warm_start_stopped_before_its_first_checkpoint_may_change_only_how_it_trains(tmp_path):
    stage = tmp_path / "sft"
    started = {"model": "m", "max_steps": 8, "sft_steps": 20, "sft_lr": 2e-4}
    assert lp.continue_flags(stage, resume=False, settings=started, keep_first_eval=True) == []
    before = stage / "eval" / "before_training"
    before.mkdir(parents=True)
    for name in lp.SETS:
        (before / f"{name}.jsonl").write_text("{}\n")
    shorter = {**started, "sft_steps": 12, "sft_lr": 1e-4}
    assert lp.continue_flags(stage, resume=True, settings=shorter, keep_first_eval=True) \
        == ["--skip-eval-before-train"]
    assert json.loads((stage / lp.STAGE_STARTED).read_text()) == shorter  # what it goes on with
    assert all((before / f"{name}.jsonl").is_file() for name in lp.SETS)
    # the evaluation depends on the episode shape: refused, nothing removed
    with pytest.raises(SystemExit, match="max_steps 8 there, 6 now"):
        lp.continue_flags(stage, resume=True, settings={**shorter, "max_steps": 6}, keep_first_eval=True)
    assert all((before / f"{name}.jsonl").is_file() for name in lp.SETS)
    # a checkpoint holds what was trained with the recorded values: no change once there is one
    (stage / "ckpt" / "iter_0000010").mkdir(parents=True)
    with pytest.raises(SystemExit, match="sft_steps 12 there, 20 now"):
        lp.continue_flags(stage, resume=True, settings=started, keep_first_eval=True)


def test_a_stage_continues_only_with_the_settings_it_was_started_with(tmp_path):
    stage = tmp_path / "rl"
    assert lp.continue_flags(stage, resume=False, settings={"lr": 1e-5}) == []
    (stage / "ckpt" / "iter_0000004").mkdir(parents=True)
    assert lp.continue_flags(stage, resume=True, settings={"lr": 1e-5}) == ["--load", str(stage / "ckpt")]
    with pytest.raises(SystemExit, match="lr 1e-05 there, 2e-05 now"):
        lp.continue_flags(stage, resume=True, settings={"lr": 2e-5})
    assert (stage / "ckpt" / "iter_0000004").is_dir()  # refused: nothing removed


def test_more_sft_steps_extend_a_finished_warm_start_from_its_checkpoint(tmp_path):
    sft = tmp_path / "sft"
    settings = {"model": "m", "sft_steps": 48, "lr": 1e-4}
    for folder in ("before_training", "rollout_000047"):
        for name in lp.SETS:
            _dump(sft / "eval" / folder / f"{name}.jsonl", [])
    for policy in ("base", "warm"):
        _dump(sft / "eval_t0.7" / policy / "eval" / "before_training" / "tasks.jsonl", [])
    (sft / "ckpt" / "iter_0000048").mkdir(parents=True)
    (tmp_path / "rl" / "ckpt").mkdir(parents=True)
    for name in ("eval_base_instances.jsonl", "eval_warm_instances.jsonl", "eval_rl_tasks.jsonl", "result.json"):
        (tmp_path / name).write_text("{}\n")
    (tmp_path / "timings.json").write_text(json.dumps({"demonstrations": 5.0, "sft": 100.0, "rl": 300.0}))
    lp.record_stage_settings(sft, settings)
    # nothing to extend: the same steps, fewer steps, or another setting changed too (stage_done reports that)
    assert lp.extend_warm_start(tmp_path, settings) is None
    assert lp.extend_warm_start(tmp_path, {**settings, "sft_steps": 24}) is None
    assert lp.extend_warm_start(tmp_path, {**settings, "sft_steps": 96, "lr": 2e-4}) is None
    assert (sft / "stage_settings.json").is_file() and (tmp_path / "rl").is_dir()

    longer = {**settings, "sft_steps": 96}
    assert lp.extend_warm_start(tmp_path, longer) == 48
    superseded = tmp_path / "superseded_sft48"
    # the shorter warm start's evaluations and the RL trained from it are kept aside; the base model's stay
    assert (superseded / "sft" / "eval" / "rollout_000047" / "tasks.jsonl").is_file()
    assert (superseded / "sft" / "eval_t0.7" / "warm").is_dir() and (superseded / "rl" / "ckpt").is_dir()
    assert not (tmp_path / "rl").exists() and not (sft / "eval_t0.7" / "warm").exists()
    # so are the run's own files of them (a --recompute then reports an unfinished run, not the old numbers)
    assert sorted(p.name for p in superseded.glob("*.json*")) == ["eval_rl_tasks.jsonl", "eval_warm_instances.jsonl",
                                                                  "result.json", "timings.json"]
    # the old RL stage's time goes with it (the new stage's is added to what is left), the SFT time stays
    assert json.loads((tmp_path / "timings.json").read_text()) == {"demonstrations": 5.0, "sft": 100.0}
    assert json.loads((superseded / "timings.json").read_text()) == {"rl": 300.0}
    assert (tmp_path / "eval_base_instances.jsonl").is_file()
    assert (sft / "eval" / "before_training" / "tasks.jsonl").is_file() and (sft / "eval_t0.7" / "base").is_dir()
    # the stage is unfinished again, started with the longer settings, and continues from its checkpoint
    assert not lp.stage_done(sft, longer, resume=True)
    assert lp.continue_flags(sft, resume=True, settings=longer, keep_first_eval=True) == ["--load", str(sft / "ckpt")]
    assert lp.extend_warm_start(tmp_path, longer) is None  # once
    # its own evaluation after the new last step and the base model's are the two the stage then holds
    for name in lp.SETS:
        _dump(sft / "eval" / "rollout_000095" / f"{name}.jsonl", [])
    base, warm = lp.evaluations(sft, 2)
    assert base["tasks"].parent.name == "before_training" and warm["tasks"].parent.name == "rollout_000095"
