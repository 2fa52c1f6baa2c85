"""Pool settings (flags over upstream's environment variables over defaults) and the router's lease ids."""

from __future__ import annotations

import argparse

import pytest

from slime.agentic.env_service.pool import PoolError
from slime.agentic.env_service.providers import CommandProvider, make_provider
from slime.agentic.env_service.router import split_lease
from slime.agentic.env_service.settings import PoolSettings, add_pool_arguments, settings_from_args


def parse(*argv):
    parser = argparse.ArgumentParser()
    add_pool_arguments(parser)
    return settings_from_args(parser.parse_args([str(a) for a in argv]))


def test_upstream_environment_variables_are_defaults_and_flags_win(monkeypatch):
    monkeypatch.setenv("WORKER_MAX_TASKS", "3")
    monkeypatch.setenv("WORKER_MAX_RUNS_PER_TASK", "5")
    monkeypatch.setenv("WORKER_RUN_IDLE_TTL", "42.5")
    settings = parse("--max-runs-per-task", 7, "--provider-option", "isolation=rlimits")
    assert (settings.max_tasks, settings.max_runs_per_task, settings.idle_ttl_s) == (3, 7, 42.5)
    assert settings.provider_options == {"isolation": "rlimits"}
    assert parse().max_runs_per_task == 5


def test_bad_settings_are_refused_with_the_name(monkeypatch):
    with pytest.raises(ValueError, match="max_tasks must be >= 1"):
        PoolSettings(max_tasks=0)
    with pytest.raises(ValueError, match="idle_ttl_s must be > 0"):
        PoolSettings(idle_ttl_s=0)
    with pytest.raises(ValueError, match="needs an API key"):
        PoolSettings(host="10.0.0.5")
    assert PoolSettings(host="10.0.0.5", api_key="k").api_key == "k"
    monkeypatch.setenv("WORKER_MAX_TASKS", "many")
    with pytest.raises(ValueError, match=r"\$WORKER_MAX_TASKS='many' is not a valid int"):
        PoolSettings.from_env()
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse("--provider-option", "novalue")


def test_providers_by_name_or_module_factory():
    assert isinstance(make_provider("command"), CommandProvider)
    assert make_provider("slime.agentic.env_service.providers:CommandProvider", {"mount_at": "/x"}).mount_at == "/x"
    with pytest.raises(ValueError, match="unknown provider 'nope'"):
        make_provider("nope")
    with pytest.raises(ValueError, match="cannot be loaded"):
        make_provider("slime.agentic.env_service.providers:Missing")


def test_router_lease_ids_name_their_pool_server():
    assert split_lease("w1:run-abc", 2) == (1, "run-abc")
    assert split_lease("w0:run:with:colons", 1) == (0, "run:with:colons")
    for bad in ("run-abc", "x1:run", "w:run", "w1:", "w5:run"):
        with pytest.raises(PoolError) as e:
            split_lease(bad, 2)
        assert e.value.status == 404
    with pytest.raises(PoolError) as e:
        split_lease(None, 2)
    assert e.value.status == 400
