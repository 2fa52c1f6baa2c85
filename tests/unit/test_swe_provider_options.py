"""The `swe` provider's checks that need no sandbox: it is registered, loads its instances, refuses unknown
instances, and answers malformed tool calls with a tool error (return code -1) instead of running anything."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slime.agentic.env_service.providers import PROVIDERS, LeaseContext, ProviderError, make_provider
from slime.agentic.swe.instances import load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES, SweEnv, SweProvider, timeout_message
from slime.agentic.swe import repos
from slime.agentic.swe.testrun import command_env


class NoBox:
    async def run(self, *a, **kw):  # pragma: no cover - must not be reached
        raise AssertionError("a malformed call must not run")


@pytest.fixture(scope="module")
def provider():
    return make_provider("swe")


def test_the_provider_is_registered_and_loads_the_shipped_instances(provider):
    assert "swe" in PROVIDERS and isinstance(provider, SweProvider) and provider.name == "swe"
    assert set(provider.instances) == {i.instance_id for i in load_instances(DEFAULT_INSTANCES)}
    assert provider.exec_timeout_s == 180.0 and timeout_message(180.0) == "Command timed out after 180 s"


def test_instances_and_options_are_checked(provider, tmp_path):
    with pytest.raises(ValueError, match="cannot load instances"):
        SweProvider(instances=tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="exec_timeout_s"):
        SweProvider(exec_timeout_s=500)
    lease = LeaseContext("l", "no__such-1", str(tmp_path))
    with pytest.raises(ProviderError) as e:
        provider.instance_for(lease, {})
    assert e.value.status == 404 and e.value.code == "UNKNOWN_INSTANCE"
    first = next(iter(provider.instances))
    assert provider.instance_for(lease, {"instance_id": first}).instance_id == first
    assert provider.instance_for(LeaseContext("l", first, str(tmp_path)), {}).instance_id == first  # the task key
    env = command_env(repos.project_of(provider.instances[first]))  # what the provider's sandboxes get
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["HOME"] == "/tmp"
    assert all(p.startswith("/testbed") for p in env["PYTHONPATH"].split(":"))
    assert "PYTHONPATH" not in command_env(None)  # another image's environment imports its own install


def test_malformed_tool_calls_are_tool_errors(provider):
    env = SweEnv(next(iter(provider.instances.values())), Path("/nonexistent"), NoBox())

    def call(name, arguments):
        return asyncio.run(provider.exec_tool(env, {"name": name, "arguments": arguments}))

    for name, arguments, says in [("bash", {}, "non-empty string"), ("bash", {"command": "  "}, "non-empty string"),
                                  ("bash", {"command": "ls", "timeout": 0}, "timeout"),
                                  ("bash", {"command": "ls", "timeout": "soon"}, "timeout"),
                                  ("bash", {"command": "ls", "timeout": 10_000}, "timeout"),
                                  ("bash", {"command": "ls", "cwd": "../etc"}, "outside /testbed"),
                                  ("rm", {}, "unknown tool")]:
        reply = call(name, arguments)
        assert reply["returncode"] == -1 and reply["output"].startswith("[TOOL_ERROR]") and says in reply["output"]
    env.evaluated = True
    with pytest.raises(ProviderError) as e:
        call("bash", {"command": "ls"})
    assert e.value.status == 409 and e.value.code == "EVALUATED"
    with pytest.raises(ProviderError) as e:
        asyncio.run(provider.evaluate(env, {"patch": 3}))
    assert e.value.status == 400
