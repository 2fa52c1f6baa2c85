"""Inspecting what was collected, end to end: a real proxy (OPENCLAW_DEBUG=1) on the tiny model, a few chat turns
in two sessions, then `GET /v1/sessions`, `GET /v1/sessions/{id}`, the CLI against the proxy and against the store
file, and the proxy's DEBUG lines (how each request was classified, what each judged turn became)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import quote

import httpx
import pytest

from helpers.jobs import poll_until

from slime.conversation.launch import ProxyProcess


@pytest.fixture(scope="module")
def proxy(engine_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sessions_view")
    with ProxyProcess(engine_server.url, folder / "conversations.db", judge="rules", log_path=folder / "proxy.log",
                      env={"OPENCLAW_DEBUG": "1", "ROLLOUT_LOG_LEVEL": "WARNING"}) as server:
        yield server


def _chat(proxy, session: str, messages: list[dict], **headers) -> dict:
    response = httpx.post(proxy.url + "/v1/chat/completions", timeout=120,
                          json={"messages": messages, "max_tokens": 8, "temperature": 0.0},
                          headers={"X-Session-Id": session, **headers})
    assert response.status_code == 200, response.text
    return response.json()


def _get(proxy, path: str, **params) -> httpx.Response:
    return httpx.get(proxy.url + path, params=params, timeout=30)


def _wait(predicate, timeout: float = 60.0):
    return poll_until(predicate, timeout)


@pytest.fixture(scope="module")
def collected(proxy):
    """view-a: a turn judged +1 by the next message, a side request, an open turn; view-b: one turn rated down
    through /v1/feedback; then a session whose id has a slash."""
    history = [{"role": "user", "content": "Hello there."}]
    first = _chat(proxy, "view-a", history)
    history += [{"role": "assistant", "content": first["choices"][0]["message"]["content"]},
                {"role": "user", "content": "thanks, that is perfect"}]
    _chat(proxy, "view-a", [{"role": "user", "content": "Give this chat a title."}], **{"X-Turn-Type": "side"})
    _chat(proxy, "view-a", history)
    _chat(proxy, "view-b", [{"role": "user", "content": "Say something."}])
    rated = httpx.post(proxy.url + "/v1/feedback", json={"session_id": "view-b", "rating": -1, "text": "shorter"})
    assert rated.status_code == 200, rated.text
    _chat(proxy, "team/alpha:1", [{"role": "user", "content": "Hi"}])
    _wait(lambda: _get(proxy, "/v1/sessions/view-a").json()["turn_rows"][0]["status"] == "sampled")
    return {"first": first}


def test_sessions_list(proxy, collected):
    page = _get(proxy, "/v1/sessions").json()
    assert page["total"] == 3 and page["limit"] == 50 and page["offset"] == 0
    by_id = {s["id"]: s for s in page["sessions"]}
    assert [s["id"] for s in page["sessions"]][0] == "team/alpha:1"  # most recently seen first
    a, b = by_id["view-a"], by_id["view-b"]
    assert a["source"] == b["source"] == "header" and a["active"] and b["active"]
    assert a["turns"] == {"total": 3, "main": 2, "side": 1, "demonstration": 0,
                          "by_status": {"sampled": 1, "side": 1, "awaiting_next_state": 1}}
    assert (a["judged"], a["judge_failures"], a["feedback"]) == (1, 0, 0)
    assert a["samples"] == {"pending": 1, "in_batch": 0, "trained": 0, "exported": 0}
    assert a["rewards"] == {"-1": 0, "0": 0, "1": 1, "mean": 1.0}
    assert (b["judged"], b["feedback"], b["rewards"]["-1"], b["samples"]["pending"]) == (1, 1, 1, 1)

    one = _get(proxy, "/v1/sessions", limit=1, offset=1).json()
    assert one["total"] == 3 and len(one["sessions"]) == 1 and one["sessions"][0]["id"] == page["sessions"][1]["id"]
    assert _get(proxy, "/v1/sessions", active=1).json()["active_only"] is True
    for params in ({"limit": 0}, {"limit": "abc"}, {"limit": 100000}, {"offset": -1}, {"offset": "x"}):
        response = _get(proxy, "/v1/sessions", **params)
        assert response.status_code == 400, (params, response.text)
        assert response.json()["error"]["param"] in ("limit", "offset")


def test_session_detail_and_404(proxy, collected):
    detail = _get(proxy, "/v1/sessions/view-a").json()
    first, side, second = detail["turn_rows"]
    usage = collected["first"]["usage"]
    assert (first["turn_num"], first["type"], first["status"], first["score"]) == (1, "main", "sampled", 1.0)
    assert (first["sample_state"], first["reward"], first["judge"]) == ("pending", 1.0, "rules")
    assert first["prompt_tokens"] == usage["prompt_tokens"] and first["response_tokens"] == usage["completion_tokens"]
    assert first["response_preview"] == (collected["first"]["choices"][0]["message"]["content"] or "")[:200]
    assert first["next_state_source"] == "request" and first["weight_version"] is not None
    assert (side["type"], side["status"], side["reason"]) == ("side", "side", "header")
    assert (second["status"], second["score"], second["sample_state"]) == ("awaiting_next_state", None, None)
    b = _get(proxy, "/v1/sessions/view-b").json()
    assert b["feedback_rows"][0]["text"] == "shorter" and b["turn_rows"][0]["next_state_source"] == "feedback"
    assert _get(proxy, "/v1/sessions/" + quote("team/alpha:1", safe="")).json()["id"] == "team/alpha:1"
    missing = _get(proxy, "/v1/sessions/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OPENCLAW_PROXY_API_KEY"}
    return subprocess.run([sys.executable, "-m", "slime.conversation", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_against_the_proxy_and_the_store(proxy, collected):
    table = _cli("sessions", "--url", proxy.url)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == "sessions 1-3 of 3, most recent first"
    assert {line.split()[0] for line in lines[2:]} == {"view-a", "view-b", "team/alpha:1"}

    detail = _cli("inspect_sessions", "--url", proxy.url, "--session", "view-a")
    assert detail.returncode == 0, detail.stderr
    assert "session    view-a" in detail.stdout and "judged     1 (0 failed)" in detail.stdout
    assert "awaiting_next_state" in detail.stdout

    from_store = _cli("sessions", "--store", str(proxy.store_path), "--json")
    from_url = _cli("sessions", "--url", proxy.url, "--json")
    assert from_store.returncode == 0 and from_url.returncode == 0, from_store.stderr + from_url.stderr
    assert json.loads(from_store.stdout) == json.loads(from_url.stdout)  # one source of truth
    slash = _cli("sessions", "--url", proxy.url, "--session", "team/alpha:1", "--json")
    assert json.loads(slash.stdout)["id"] == "team/alpha:1"

    missing = _cli("sessions", "--url", proxy.url, "--session", "nope")
    assert missing.returncode == 2 and "404" in missing.stderr and "Traceback" not in missing.stderr
    missing = _cli("sessions", "--store", str(proxy.store_path), "--session", "nope")
    assert missing.returncode == 2 and "no session 'nope'" in missing.stderr


def test_debug_log_shows_classification_and_judging(proxy, collected):
    log = _wait(lambda: (text := proxy.log_path.read_text(encoding="utf-8", errors="replace"))
                and "judge rules score" in text and text)
    assert "log level DEBUG (from $OPENCLAW_DEBUG)" in log  # OPENCLAW_DEBUG wins over ROLLOUT_LOG_LEVEL
    assert "classified request: session view-a from X-Session-Id header; main turn" in log
    assert "session view-a from X-Session-Id header; side turn: X-Turn-Type header" in log
    assert "session view-a: main-line request continues none of its 0 open turn(s)" in log
    assert "session view-a: main-line request continues turn id" in log
    assert "session view-a turn 1 (id" in log and "votes [rules +1]; method rl: sample with reward +1" in log
