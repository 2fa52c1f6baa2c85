"""One settings object from trainer to proxy: every option has one name and one default on both command lines,
the trainer hands the settings over as a file without keys, and the proxy's own CLI fills the same dataclass."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from slime.conversation.settings import (SECRETS, ConversationSettings, build_parser, defaults, flag_of, from_cli)
from slime.utils.arguments import build_parser as trainer_parser
from slime.utils.arguments import parse_args


def _trainer_actions():
    return {a.dest: a for a in trainer_parser()._actions}


def test_trainer_flags_are_the_settings_fields_with_the_same_defaults(monkeypatch):
    for variable in ("HOST", "PORT", "SERVED_MODEL_NAME", "PRM_M", "OPENCLAW_OPD_TEACHER_LP_MAX_CONCURRENCY"):
        monkeypatch.delenv(variable, raising=False)
    trainer = _trainer_actions()
    proxy = {a.dest: a for a in build_parser()._actions}
    reference = defaults()
    for f in fields(ConversationSettings):
        assert flag_of(f.name) in proxy[f.name].option_strings  # the proxy takes every field by its one name
        if f.metadata["trainer"]:
            action = trainer[f.name]
            assert action.option_strings[0] == flag_of(f.name)
            assert action.default == getattr(reference, f.name), f.name
        else:
            assert f.name not in trainer, f"{f.name} is derived by the trainer, not a trainer flag"


def test_environment_defaults_are_read_when_the_parser_is_built(monkeypatch):
    monkeypatch.setenv("PORT", "31234")
    monkeypatch.setenv("PRM_M", "5")
    assert defaults().proxy_port == 31234 and defaults().prm_m == 5
    args = trainer_parser().parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "1"])
    assert args.proxy_port == 31234 and args.prm_m == 5
    monkeypatch.setenv("PORT", "not-a-port")
    with pytest.raises(ValueError, match=r"\$PORT='not-a-port' is not a valid --proxy-port"):
        defaults()


def test_the_file_round_trips_without_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("SLIME_JUDGE_API_KEY", "judge-secret")
    settings = ConversationSettings(engine_url="http://127.0.0.1:1", conversation_store="c.db",
                                    conversation_method="combine", prm_m=2, python_path=["/x"],
                                    api_key="proxy-secret", engine_api_key="engine-secret")
    path = settings.write(tmp_path / "s.json")
    text = path.read_text()
    assert "secret" not in text and not set(json.loads(text)) & set(SECRETS)
    monkeypatch.setenv("OPENCLAW_PROXY_API_KEY", "proxy-secret")
    read = ConversationSettings.read(path)
    assert read.prm_m == 2 and read.python_path == ["/x"] and read.conversation_method == "combine"
    assert read.api_key == "proxy-secret" and read.judge_api_key == "judge-secret" and read.engine_api_key is None
    # flags given to the proxy win over the file; the older proxy spellings still work
    merged = from_cli(["--settings", str(path), "--prm-m", "4", "--judge", "rules", "--port", "31000"])
    assert (merged.prm_m, merged.prm_type, merged.proxy_port, merged.conversation_store) == (4, "rules", 31000, "c.db")


def test_bad_files_and_values_are_explained(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"prm_m": 2, "nonsense": 1}))
    with pytest.raises(ValueError, match=r"unknown keys \['nonsense'\]"):
        ConversationSettings.read(tmp_path / "bad.json")
    (tmp_path / "leak.json").write_text(json.dumps({"api_key": "x"}))
    with pytest.raises(ValueError, match="belong in the environment"):
        ConversationSettings.read(tmp_path / "leak.json")
    with pytest.raises(ValueError, match="cannot read"):
        ConversationSettings.read(tmp_path / "missing.json")
    settings = ConversationSettings(engine_url="http://127.0.0.1:1", conversation_store="c.db", prm_m=0)
    with pytest.raises(ValueError, match="--prm-m must be >= 1"):
        settings.check()
    with pytest.raises(ValueError, match="without an API key"):
        ConversationSettings(engine_url="http://e:1", conversation_store="c.db", proxy_host="0.0.0.0").check()
    with pytest.raises(ValueError, match="engine's URL"):
        ConversationSettings(conversation_store="c.db").check()


def test_trainer_builds_the_settings_once_from_its_arguments(tmp_path):
    folder = tmp_path / "method-folder"
    folder.mkdir()
    args = parse_args(["--hf-checkpoint", "tiny", "--rollout-batch-size", "2", "--num-rollout", "1",
                       "--disable-rollout-global-dataset", "--conversation-method", "combine", "--prm-m", "2",
                       "--hint-judge-type", "rules", "--session-idle-ttl", "60", "--extra-python-path", str(folder),
                       "--data-source-path", "slime.conversation.rollout.ConversationDataSource",
                       "--rollout-temperature", "0.7", "--rollout-max-response-len", "64"])
    from slime.conversation.rollout import ConversationDataSource

    source = ConversationDataSource.__new__(ConversationDataSource)  # no proxy started: only the settings
    source.args, source.store_path, source.judge_engine = args, tmp_path / "c.db", None
    args.engine_urls = ["http://127.0.0.1:1"]
    args.prm_engine_url = "http://127.0.0.1:2"  # an outside judge engine, so nothing is started here
    settings = source.proxy_settings(tmp_path)
    assert settings.conversation_method == "combine" and settings.prm_m == 2 and settings.session_idle_ttl == 60
    assert settings.prm_engine_url == settings.teacher_engine_url == "http://127.0.0.1:2"
    assert settings.teacher_temperature == settings.temperature == 0.7 and settings.max_response_tokens == 64
    assert settings.python_path == [str(folder.resolve())]
    settings.check()
