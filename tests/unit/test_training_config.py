"""`slime.launch.training_config`: a YAML training config (the usage guide's keys) becomes trainer flags; unknown
keys, keys of the guide with no counterpart, wrong types and a method that does not suit the entry point are
errors naming the key (exit status 2)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slime.launch import training_config as tc
from slime.launch.training_config import ConfigError, load_config, main, training_flags

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {"config/training_config.yaml": "combine", "config/training_config_cpu.yaml": "combine"}

# every accepted key (documented name and aliases): a config that sets it, and the flags it must give
MAPPING = [
    ({"model": "smollm2"}, ["--hf-checkpoint", "smollm2"]),
    ({"model": {"path": "/m/q"}}, ["--hf-checkpoint", "/m/q"]),
    ({"model": {"checkpoint_path": "/m/q"}}, ["--hf-checkpoint", "/m/q"]),
    ({"model": {"name": "smollm2"}}, ["--hf-checkpoint", "smollm2"]),
    ({"model": {"path": "/m/q", "name": "qwen3-4b"}}, ["--hf-checkpoint", "/m/q", "--served-model-name", "qwen3-4b"]),
    ({"training": {"method": "combine"}}, []),
    ({"training": {"batch_size": 8}}, ["--rollout-batch-size", "8"]),
    ({"rollout": {"batch_size": 8}}, ["--rollout-batch-size", "8"]),
    ({"training": {"learning_rate": 1e-6}}, ["--lr", "1e-06"]),
    ({"training": {"lr": 2e-5}}, ["--lr", "2e-05"]),
    ({"training": {"lr_decay_style": "cosine"}}, ["--lr-decay-style", "cosine"]),
    ({"training": {"warmup_steps": 100}}, ["--lr-warmup-iters", "100"]),
    ({"training": {"max_steps": 10000}}, ["--num-rollout", "10000"]),
    ({"training": {"weight_decay": 0.1}}, ["--weight-decay", "0.1"]),
    ({"training": {"max_grad_norm": 1}}, ["--clip-grad", "1"]),
    ({"training": {"clip_grad": 0.5}}, ["--clip-grad", "0.5"]),
    ({"training": {"seed": 7}}, ["--seed", "7"]),
    ({"training": {"ppo_clip_ratio": 0.2}}, ["--eps-clip", "0.2"]),
    ({"training": {"ppo_clip_ratio_high": 0.28}}, ["--eps-clip-high", "0.28"]),
    ({"training": {"kl_coef": 0.05}}, ["--use-kl-loss", "--kl-loss-coef", "0.05"]),
    ({"training": {"kl_loss_coef": 0.0}}, ["--kl-loss-coef", "0.0"]),
    ({"training": {"kl_loss_type": "low_var_kl"}}, ["--kl-loss-type", "low_var_kl"]),
    ({"training": {"entropy_coef": 0.01}}, ["--entropy-coef", "0.01"]),
    ({"training": {"binary_weight": 0.5}}, ["--combine-w-rl", "0.5"]),
    ({"training": {"opd_weight": 0.5}}, ["--combine-w-opd", "0.5"]),
    ({"training": {"hint_judge": "llm"}}, ["--hint-judge-type", "llm"]),
    ({"training": {"method": "combine_topk", "distill_topk": 20}}, ["--distill-topk", "20"]),
    ({"training": {"save_interval": 10}}, ["--save-interval", "10"]),
    ({"save_interval": 10}, ["--save-interval", "10"]),
    ({"training": {"checkpoint_dir": "ckpt/x"}}, ["--save", "ckpt/x"]),
    ({"checkpoint_dir": "ckpt/x"}, ["--save", "ckpt/x"]),
    ({"training": {"resume_from": "ckpt/x"}}, ["--load", "ckpt/x"]),
    ({"training": {"lora": {"enabled": True}}}, ["--use-lora"]),
    ({"training": {"lora": {"rank": 8}}}, ["--lora-rank", "8"]),
    ({"training": {"lora": {"alpha": 16}}}, ["--lora-alpha", "16"]),
    ({"training": {"lora": {"dropout": 0.1}}}, ["--lora-dropout", "0.1"]),
    ({"training": {"lora": {"target_modules": ["q_proj", "v_proj"]}}}, ["--lora-target-modules", "q_proj,v_proj"]),
    ({"rollout": {"temperature": 0.7}}, ["--rollout-temperature", "0.7"]),
    ({"rollout": {"max_response_len": 1024}}, ["--rollout-max-response-len", "1024"]),
    ({"rollout": {"max_new_tokens": 1024}}, ["--rollout-max-response-len", "1024"]),
    ({"rollout": {"max_context_len": 4096}}, ["--rollout-max-context-len", "4096"]),
    ({"rollout": {"top_p": 0.9}}, ["--rollout-top-p", "0.9"]),
    ({"rollout": {"top_k": 50}}, ["--rollout-top-k", "50"]),
    ({"evaluation": {"judge_model": "/m/judge"}}, ["--prm-model-path", "/m/judge"]),
    ({"evaluation": {"judge_type": "rules+embedding"}}, ["--prm-type", "rules+embedding"]),
    ({"evaluation": {"num_judges": 3}}, ["--prm-m", "3"]),
    ({"evaluation": {"majority_voting": True}}, []),
    ({"evaluation": {"majority_voting": False}}, ["--prm-m", "1"]),
    ({"evaluation": {"judge_temperature": 0.6}}, ["--prm-temperature", "0.6"]),
    ({"evaluation": {"temperature": 0.6}}, ["--prm-temperature", "0.6"]),
    ({"evaluation": {"judge_max_tokens": 4096}}, ["--prm-max-new-tokens", "4096"]),
    ({"evaluation": {"max_new_tokens": 4096}}, ["--prm-max-new-tokens", "4096"]),
    ({"evaluation": {"judge_timeout": 120}}, ["--prm-timeout", "120"]),
]


def _paths(config: dict, prefix: str = "") -> set[str]:
    out = set()
    for name, value in config.items():
        if isinstance(value, dict) and f"{prefix}{name}" in tc.SECTIONS:
            out |= _paths(value, f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    return out


def test_the_mapping_table_covers_every_accepted_key():
    covered = set().union(*(_paths(config) for config, _ in MAPPING))
    assert covered == set(tc.accepted_keys())


@pytest.mark.parametrize("config, flags", MAPPING, ids=lambda v: str(v) if isinstance(v, dict) else None)
def test_every_key_maps_onto_its_flag(config, flags):
    assert training_flags(config, method="combine").flags == flags


def test_the_usage_guide_example_maps_where_it_can():
    guide = {"model": {"name": "qwen3-4b", "checkpoint_path": "/ckpt"},
             "training": {"method": "combine", "batch_size": 32, "learning_rate": 1e-6, "warmup_steps": 100,
                          "max_steps": 10000, "ppo_clip_ratio": 0.2, "binary_weight": 0.5, "opd_weight": 0.5},
             "evaluation": {"judge_model": "/judge", "majority_voting": True, "num_judges": 3}}
    plan = training_flags(guide, method="combine")
    assert plan.method == "combine"
    assert plan.flags == ["--hf-checkpoint", "/ckpt", "--served-model-name", "qwen3-4b", "--rollout-batch-size", "32",
                          "--lr", "1e-06", "--lr-warmup-iters", "100", "--num-rollout", "10000", "--eps-clip", "0.2",
                          "--combine-w-rl", "0.5", "--combine-w-opd", "0.5", "--prm-model-path", "/judge",
                          "--prm-m", "3"]


def _error(config: dict, method: str | None = "combine") -> str:
    with pytest.raises(ConfigError) as info:
        training_flags(config, method=method, source="c.yaml")
    return str(info.value)


def test_unknown_key_names_its_full_path_and_lists_the_accepted_keys():
    message = _error({"training": {"lora": {"rnak": 8}, "lerning_rate": 1e-5}})
    assert "unknown key 'training.lora.rnak' (did you mean 'training.lora.rank'?)" in message
    assert "unknown key 'training.lerning_rate' (did you mean 'training.learning_rate'?)" in message
    assert message.startswith("c.yaml: 2 problems")
    assert "accepted keys: model.path, model.checkpoint_path, model, model.name, training.method" in message


def test_unknown_section_is_reported_once():
    message = _error({"trainng": {"batch_size": 8, "learning_rate": 1e-5}})
    assert message.startswith("c.yaml: unknown section 'trainng' (did you mean 'training'?)")


def test_guide_keys_without_a_counterpart_say_why():
    message = _error({"training": {"gae_lambda": 0.95}, "rollout": {"num_workers": 4}})
    assert "'training.gae_lambda' (a key of the OpenClaw-RL usage guide) has no counterpart here: GRPO" in message
    assert "'rollout.num_workers'" in message and "ROLLOUT_GPUS" in message


@pytest.mark.parametrize("config, expected", [
    ({"training": {"batch_size": "eight"}}, "'training.batch_size' must be an integer (--rollout-batch-size), "
                                            "got 'eight' (str)"),
    ({"training": {"batch_size": 8.5}}, "'training.batch_size' must be an integer"),
    ({"training": {"batch_size": True}}, "'training.batch_size' must be an integer"),
    ({"training": {"learning_rate": "fast"}}, "'training.learning_rate' must be a number (--lr), got 'fast'"),
    ({"training": {"lora": {"enabled": "yes"}}}, "'training.lora.enabled' must be true or false"),
    ({"training": {"lora": {"target_modules": [1, 2]}}}, "'training.lora.target_modules' must be a list of names"),
    ({"model": {"path": 3}}, "'model.path' must be a string"),
    ({"rollout": {"temperature": [0.6]}}, "'rollout.temperature' must be a number"),
    ({"training": 5}, "'training' must be a mapping of keys (training.method, training.batch_size"),
])
def test_wrong_types_name_the_key(config, expected):
    assert expected in _error(config)


def test_null_means_not_set_and_empty_sections_are_fine():
    assert training_flags({"model": None, "training": {"learning_rate": None}, "rollout": None},
                          method="rl").flags == []


def test_two_names_of_one_flag_must_agree():
    assert "'training.kl_coef' and 'training.kl_loss_coef' set --kl-loss-coef to different values" in \
        _error({"training": {"kl_coef": 0.1, "kl_loss_coef": 0.2}})
    assert training_flags({"training": {"batch_size": 8}, "rollout": {"batch_size": 8}}).flags == \
        ["--rollout-batch-size", "8"]


def test_single_vote_against_several_judges():
    assert "'evaluation.majority_voting' is false but 'evaluation.num_judges' is 3" in \
        _error({"evaluation": {"majority_voting": False, "num_judges": 3}})


@pytest.mark.parametrize("configured, entry, chosen", [
    ("binary", "rl", "rl"), ("binary_rl", "rl", "rl"), ("rl", "rl", "rl"), ("opd", "opd", "opd"),
    ("opd_topk", "opd", "opd_topk"), ("combined", "combine", "combine"), ("combine-topk", "combine", "combine_topk"),
])
def test_the_method_may_be_the_entry_points_or_its_topk_variant(configured, entry, chosen):
    assert training_flags({"training": {"method": configured}}, method=entry).method == chosen


def test_method_mismatch_says_what_to_do():
    message = _error({"training": {"method": "opd"}}, method="rl")
    assert "'training.method' is 'opd' but this entry point trains rl: use the entry point of opd's method folder" \
        in message
    assert "'binary' (rl)" in _error({"training": {"method": "binary"}}, method="combine")
    assert "unknown conversation method 'hybrid'" in _error({"training": {"method": "hybrid"}})
    assert "is a plugin" in _error({"training": {"method": "my_method:build"}})


def test_keys_of_one_method_are_refused_for_another():
    assert "'training.binary_weight' applies to methods with both a reward and hints (Combine) only, not to rl" in \
        _error({"training": {"binary_weight": 0.5}}, method="rl")
    assert "'training.distill_topk' applies to the top-K methods only, not to opd" in \
        _error({"training": {"method": "opd", "distill_topk": 8}}, method="opd")
    assert training_flags({"training": {"hint_judge": "llm"}}, method=None).flags  # no method known: not checked


# --- loading, overrides, command line -----------------------------------------------------------------------


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_yaml_numbers_and_env_interpolation(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_CKPT", "/models/q")
    path = _write(tmp_path, "model: ${oc.env:MY_CKPT}\ntraining:\n  learning_rate: 1e-6\n")
    assert load_config(path) == {"model": "/models/q", "training": {"learning_rate": 1e-6}}


@pytest.mark.parametrize("overrides, expected", [
    (["training.learning_rate=2e-5"], {"model": "smollm2", "training": {"learning_rate": 2e-5, "batch_size": 8}}),
    (["+rollout.temperature=0.7"], {"model": "smollm2", "training": {"learning_rate": 1e-6, "batch_size": 8},
                                    "rollout": {"temperature": 0.7}}),
    (["++training.batch_size=4", "++training.seed=1"],
     {"model": "smollm2", "training": {"learning_rate": 1e-6, "batch_size": 4, "seed": 1}}),
    (["~training.batch_size", "model=/a b"], {"model": "/a b", "training": {"learning_rate": 1e-6}}),
])
def test_hydra_style_overrides(tmp_path, overrides, expected):
    path = _write(tmp_path, "model: smollm2\ntraining:\n  learning_rate: 1e-6\n  batch_size: 8\n")
    assert load_config(path, overrides) == expected


@pytest.mark.parametrize("override, expected", [
    ("training.seed=1", "the config has no 'training.seed'; add it with +training.seed=..."),
    ("+training.batch_size=4", "'training.batch_size' is already set"),
    ("~training.seed", "there is no 'training.seed' to delete"),
    ("training.batch_size=1,2", "sweeps are not supported"),
    ("training.batch_size", "override:"),
])
def test_bad_overrides(tmp_path, override, expected):
    path = _write(tmp_path, "training:\n  batch_size: 8\n")
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(path, [override])


def test_main_prints_flags_nul_separated_with_the_method_first(tmp_path, capsys):
    path = _write(tmp_path, "model: '/models/with space'\ntraining:\n  method: opd_topk\n  batch_size: 4\n")
    assert main([path, "--null", "--print-method", "--method", "opd", "training.batch_size=2"]) == 0
    assert capsys.readouterr().out.split("\0") == ["opd_topk", "--hf-checkpoint", "/models/with space",
                                                  "--rollout-batch-size", "2", ""]
    assert main([str(REPO / "config/training_config_cpu.yaml"), "--print-method", "--method", "combine",
                 "~training.method"]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == ["combine", "--hf-checkpoint", "smollm2"]


@pytest.mark.parametrize("text, expected", [
    ("training:\n  lerning_rate: 1\n", "unknown key 'training.lerning_rate'"),
    ("training: [1, 2\n", "not valid YAML"),
    ("- 1\n- 2\n", "must be a mapping of sections"),
    ("model: ${oc.env:SURELY_NOT_SET_ANYWHERE}\n", "SURELY_NOT_SET_ANYWHERE"),
])
def test_main_exits_2_with_the_error_on_stderr(tmp_path, capsys, text, expected):
    assert main([_write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err
    assert main([str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err


# --- the shipped examples and the docs --------------------------------------------------------------------------


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_examples_map_and_every_key_is_commented(example, monkeypatch):
    monkeypatch.setenv("HF_CKPT", "/models/Qwen3-4B")
    plan = training_flags(load_config(str(REPO / example)), method=EXAMPLES[example])
    assert plan.method == EXAMPLES[example] and "--lr" in plan.flags
    for number, line in enumerate((REPO / example).read_text().splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#") and not re.fullmatch(r"\s*\w+:\s*", line):  # sections
            assert "#" in line, f"{example}:{number} has no comment: {line}"


def test_readme_documents_every_key():
    readme = (REPO / "config/README.md").read_text()
    for path in tc.accepted_keys() + list(tc.NOT_APPLICABLE):
        assert f"`{path}`" in readme, path
