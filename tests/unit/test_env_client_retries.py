"""The environment client's retry policy: what may be repeated is, what could run twice is not.

The network failures are made by an httpx transport (a lost answer cannot be produced on demand by a real server);
the service itself is tested over real HTTP in tests/integration/test_env_service.py."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from slime.agentic.env_service.client import EnvClient, EnvServiceError


class Script:
    """Answers requests from a list of outcomes per path: an int status (with a JSON body), or an exception."""

    def __init__(self, outcomes: dict[str, list]):
        self.outcomes = {path: list(items) for path, items in outcomes.items()}
        self.calls: list[tuple[str, dict]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.calls.append((path, json.loads(request.content or b"{}")))
        outcome = self.outcomes[path].pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        status, body = outcome if isinstance(outcome, tuple) else (outcome, {})
        ok = status == 200
        payload = {"ok": ok, **body} if ok else {"ok": False, "code": body.get("code", "X"), "error": "scripted"}
        return httpx.Response(status, json=payload)

    def paths(self):
        return [path for path, _ in self.calls]


def client_for(script: Script, **kwargs) -> EnvClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(script), base_url="http://env")
    return EnvClient("http://env", client=http, backoff_s=0.0, allocate_backoff_s=0.0, **kwargs)


def lost_answer(request=None):
    return httpx.ReadError("connection reset while reading the answer")


def never_sent():
    return httpx.ConnectError("connection refused")


def test_allocate_retries_429_and_lost_answers_with_the_same_request_id():
    script = Script({"/allocate": [429, lost_answer(), 503, (200, {"lease_id": "run-1", "reused": True})]})
    reply = asyncio.run(client_for(script).allocate("t"))
    assert reply["lease_id"] == "run-1"
    ids = {body["request_id"] for _, body in script.calls}
    assert len(script.calls) == 4 and len(ids) == 1  # every repeat is recognisable as the same allocate


def test_allocate_gives_up_after_its_back_pressure_budget():
    script = Script({"/allocate": [429] * 3})
    with pytest.raises(EnvServiceError) as e:
        asyncio.run(client_for(script, allocate_retries=2).allocate("t"))
    assert e.value.status == 429 and len(script.calls) == 3


def test_allocate_waits_out_back_pressure_past_a_hundred_429s_until_its_time_budget():
    # an evaluation starts more episodes than the service has slots: they wait for one (a count of 100 x 1 s ended
    # them while the 0.5B model's episodes held every slot for minutes), up to allocate_wait_s
    script = Script({"/allocate": [429] * 150 + [(200, {"lease_id": "run-1", "reused": False})]})
    assert asyncio.run(client_for(script).allocate("t"))["lease_id"] == "run-1"
    assert len(script.calls) == 151
    script = Script({"/allocate": [429] * 1000})
    with pytest.raises(EnvServiceError) as e:
        asyncio.run(client_for(script, allocate_wait_s=0.0).allocate("t"))
    assert e.value.status == 429 and len(script.calls) == 1


def test_exec_tool_is_never_repeated_after_a_lost_answer_or_a_server_error():
    for outcome in (lost_answer(), 500, 504):
        script = Script({"/exec_tool": [outcome, (200, {"observation": "ran twice"})]})
        with pytest.raises(EnvServiceError):
            asyncio.run(client_for(script).exec_tool("run-1", "shell_exec", {"command": "rm -rf x"}))
        assert script.paths() == ["/exec_tool"]


def test_a_request_that_never_left_is_retried_for_every_call():
    script = Script({"/exec_tool": [never_sent(), (200, {"observation": "once"})],
                     "/evaluate": [never_sent(), (200, {"score": 1.0})]})
    client = client_for(script)
    assert asyncio.run(client.exec_tool("run-1", "x", {}))["observation"] == "once"
    assert asyncio.run(client.evaluate("run-1"))["score"] == 1.0
    assert script.paths() == ["/exec_tool", "/exec_tool", "/evaluate", "/evaluate"]


def test_reset_heartbeat_and_close_are_repeated_and_an_unknown_lease_counts_as_closed():
    script = Script({"/reset": [lost_answer(), (200, {"user_msg": "hi", "tool_schemas": []})],
                     "/heartbeat": [502, 200],
                     "/close": [lost_answer(), (404, {"code": "UNKNOWN_LEASE"})]})
    client = client_for(script)
    assert asyncio.run(client.reset("run-1", {"task": "a"}))["user_msg"] == "hi"
    asyncio.run(client.heartbeat("run-1"))
    assert asyncio.run(client.close("run-1")) is False  # the first close ran, its answer was lost
    assert script.paths() == ["/reset", "/reset", "/heartbeat", "/heartbeat", "/close", "/close"]


def test_client_errors_are_not_retried_and_name_the_code():
    script = Script({"/reset": [(409, {"code": "NOT_RESET"})]})
    with pytest.raises(EnvServiceError) as e:
        asyncio.run(client_for(script).reset("run-1"))
    assert (e.value.status, e.value.code) == (409, "NOT_RESET") and len(script.calls) == 1
