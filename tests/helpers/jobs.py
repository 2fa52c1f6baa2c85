"""Waiting on a running conversation job (`slime.conversation.launch.ConversationJob`) from a test."""

from __future__ import annotations

import time
from pathlib import Path

import httpx


def healthz(url: str) -> dict | None:
    """The proxy's /healthz body while the engine behind it answers, else None."""
    try:
        response = httpx.get(url + "/healthz", timeout=5)
        return response.json() if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


def poll_until(predicate, timeout: float, what: str = "a condition", jobs=(), interval: float = 0.2):
    """Poll `predicate` until it returns something truthy (and return that). `jobs`: processes to watch (objects with
    `process`, `name`, `log_path`): if one exits meanwhile, fail at once with the tail of its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for job in jobs:
            if job.process.poll() is not None:
                try:
                    tail = Path(job.log_path).read_text(errors="replace")[-3000:]
                except (OSError, TypeError):
                    tail = ""
                raise AssertionError(f"{job.name} exited with {job.process.returncode} while waiting for {what}; "
                                     f"see {job.log_path}\n{tail}")
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for(predicate, timeout: float, job, what: str):
    """Poll `predicate` until it returns something truthy; fail early if the job exits meanwhile."""
    return poll_until(predicate, timeout, what, [job], interval=1.0)
