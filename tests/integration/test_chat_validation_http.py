"""Chat bodies that OpenAI refuses get OpenAI's 400 over HTTP, from the engine and from the conversation proxy in
front of it (slime.engine.chat_validation behind both), and both keep serving valid requests afterwards."""

from __future__ import annotations

import httpx
import pytest

from slime.conversation.launch import ProxyProcess

USER = [{"role": "user", "content": "hi"}]
VALID = {"messages": USER, "max_tokens": 2}

INVALID = [
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content",
     "Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an integer "
     "instead."),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role",
     "Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and "
     "'developer'."),
    ({"messages": []}, "messages",
     "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."),
    ({"messages": USER, "temperature": 3, "stream": True}, "temperature",
     "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."),
    ({"messages": USER + [{"role": "assistant", "content": None,
                           "tool_calls": [{"id": "call_x", "type": "function"}]}]},
     "messages[1].tool_calls[0].function", "Missing required parameter: 'messages[1].tool_calls[0].function'."),
    ({"messages": USER + [{"role": "tool", "tool_call_id": "call_x", "content": "42"}]}, "messages[1].role",
     "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."),
]


@pytest.fixture(scope="module")
def proxy(engine_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("proxy-validation")
    with ProxyProcess(engine_server.url, folder / "conversations.db", judge="rules",
                      log_path=folder / "proxy.log") as server:
        yield server


@pytest.fixture(params=["engine", "proxy"])
def url(request, engine_server):
    server = engine_server if request.param == "engine" else request.getfixturevalue("proxy")
    return server.url + "/v1/chat/completions"


@pytest.mark.parametrize("payload, param, message", INVALID,
                         ids=["content-int", "bad-role", "no-messages", "temperature-3-stream",
                              "tool-call-without-function", "orphan-tool-message"])
def test_invalid_chat_body_gets_openai_400_and_server_keeps_serving(url, payload, param, message):
    response = httpx.post(url, json=payload, timeout=60)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(response.json()) == {"error"} and set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["code"] == 400
    assert (error["param"], error["message"]) == (param, message)

    served = httpx.post(url, json=VALID, timeout=120)
    assert served.status_code == 200, served.text
    assert served.json()["choices"][0]["message"]["role"] == "assistant"


def test_engine_specific_refusals_still_come_after_the_openai_checks(url):
    """Valid for OpenAI, not supported by this engine: refused by the engine (through the proxy too)."""
    response = httpx.post(url, json={**VALID, "frequency_penalty": 0.5}, timeout=60)
    assert response.status_code == 400, response.text
    assert "not supported by this engine" in response.json()["error"]["message"]
