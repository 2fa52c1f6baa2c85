"""Fixtures the SWE service and agent tests share (imported by them): the first shipped instance, a real pool server
of the `swe` provider for the module (its `state_dir` kept on the process object), and the skip marker for hosts
without the bubblewrap sandbox."""

from __future__ import annotations

import asyncio

import pytest

from slime.agentic import sandbox as sb
from slime.agentic.env_service.client import EnvClient
from slime.agentic.env_service.launch import PoolServerProcess
from slime.agentic.env_service.settings import PoolSettings
from slime.agentic.swe.instances import load_instances
from slime.agentic.swe.provider import DEFAULT_INSTANCES

_CAP = sb.detect_capability("bwrap")
requires_bwrap = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


@pytest.fixture(scope="module")
def instance():
    return load_instances(DEFAULT_INSTANCES)[0]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    state = tmp_path_factory.mktemp("pool")
    with PoolServerProcess(PoolSettings(provider="swe", state_dir=str(state))) as server:
        server.state_dir = state
        yield server


def episode(url: str, instance_id: str, body):
    """Allocate and reset a lease of `instance_id` at the pool server `url`, run `body(env, lease_id, reset_reply)`
    (a coroutine function), close the lease whatever happened; body's result."""
    async def go():
        async with EnvClient(url) as env:
            lease_id = (await env.allocate(instance_id))["lease_id"]
            try:
                reset = await env.reset(lease_id, {"instance_id": instance_id})
                return await body(env, lease_id, reset)
            finally:
                await env.close(lease_id)
    return asyncio.run(go())


def bash(env, lease_id: str, command: str, **kw):
    return env.exec_tool(lease_id, "bash", {"command": command, **kw})
