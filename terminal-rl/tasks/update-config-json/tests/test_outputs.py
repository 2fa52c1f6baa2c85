import json
from pathlib import Path

CFG = Path("/app/config.json")


def config():
    return json.loads(CFG.read_text())


def test_server_settings():
    server = config()["server"]
    assert server["port"] == 8080 and server["max_connections"] == 200


def test_logging_level_and_legacy_removed():
    cfg = config()
    assert cfg["logging"]["level"] == "debug"
    assert "legacy_mode" not in cfg


def test_everything_else_unchanged():
    assert config() == {
        "name": "billing-api",
        "server": {"host": "0.0.0.0", "port": 8080, "workers": 4, "max_connections": 200},
        "logging": {"level": "debug", "file": "/var/log/billing.log", "rotate": {"days": 7}},
        "features": ["invoices", "refunds"],
        "database": {"url": "postgres://db:5432/billing", "pool": 10},
    }
