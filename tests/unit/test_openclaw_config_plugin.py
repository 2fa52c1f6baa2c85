"""`openclaw-config --plugin`: the openclaw.json for the rl-training-headers plugin (extensions/rl-training-headers).
The e2e test (tests/e2e/test_openclaw_plugin.py) runs the real OpenClaw with exactly this config."""

from __future__ import annotations

import json

from slime.conversation.openclaw_config import PLUGIN_ID, openclaw_config


def test_plain_config_has_no_plugin():
    config = openclaw_config("http://127.0.0.1:30000", "m")
    assert "plugins" not in config
    assert list(config["models"]["providers"]) == ["slime"]
    assert config["agents"]["defaults"]["model"]["primary"] == "slime/m"


def test_plugin_config_uses_the_plugin_provider_and_the_guide_keys():
    config = openclaw_config("http://127.0.0.1:30000", "m", plugin=True, session_tracking=False)
    assert config["agents"]["defaults"]["model"]["primary"] == "rl-training/m"
    assert config["models"]["providers"]["rl-training"]["baseUrl"] == "http://127.0.0.1:30000/v1"
    entry = config["plugins"]["entries"][PLUGIN_ID]
    assert config["plugins"]["allow"] == [PLUGIN_ID]
    assert entry["enabled"] is True
    # OpenClaw withholds a run's trigger (user / heartbeat / cron) from plugins without conversation access
    assert entry["hooks"] == {"allowConversationAccess": True}
    assert entry["config"] == {"rollout_endpoint": "http://127.0.0.1:30000/v1", "training_mode": "async",
                               "session_tracking": False}
    assert "load" not in config["plugins"]  # installed with `openclaw plugins install`, not loaded by path
    with_path = openclaw_config("http://h:1/v1", "m", plugin=True, plugin_path="/opt/plugin")
    assert with_path["plugins"]["load"] == {"paths": ["/opt/plugin"]}


def test_plugin_manifest_schema_accepts_what_we_write():
    """The plugin's manifest declares every key openclaw_config writes (OpenClaw refuses unknown keys)."""
    from pathlib import Path

    manifest = json.loads((Path(__file__).resolve().parents[2] / "extensions" / "rl-training-headers" /
                           "openclaw.plugin.json").read_text())
    assert manifest["id"] == PLUGIN_ID and manifest["providers"] == ["rl-training"]
    schema = manifest["configSchema"]
    assert schema["additionalProperties"] is False
    written = openclaw_config("http://h:1", "m", plugin=True, debug_log="/tmp/x")["plugins"]["entries"][PLUGIN_ID]
    assert set(written["config"]) <= set(schema["properties"])
