"""Fixtures the SWE service and agent tests share (imported by them): the first shipped instance, a real pool server
of the `swe` provider for the module (its `state_dir` kept on the process object), and the skip marker for hosts
without the bubblewrap sandbox."""

from __future__ import annotations

import pytest

from slime.agentic import sandbox as sb
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
