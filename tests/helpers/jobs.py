"""Waiting on a running conversation job (`slime.conversation.launch.ConversationJob`) from a test."""

from __future__ import annotations

import time

import httpx


def healthz(url: str) -> dict | None:
    """The proxy's /healthz body while the engine behind it answers, else None."""
    try:
        response = httpx.get(url + "/healthz", timeout=5)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


def wait_for(predicate, timeout: float, job, what: str):
    """Poll `predicate` until it returns something truthy; fail early if the job exits meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.process.poll() is not None:
            raise AssertionError(f"{job.name} exited with {job.process.returncode} while waiting for {what}; "
                                 f"see {job.log_path}")
        value = predicate()
        if value:
            return value
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}")
