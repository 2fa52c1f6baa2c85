"""A small client for apps that call their own model and hand us the traces (`POST /v1/traces`).

    from slime.conversation.trace_client import TraceClient

    traces = TraceClient("http://127.0.0.1:30000", spool="~/.cache/myapp/traces.jsonl")
    trace_id = traces.record(task="support", model="my-model", prompt=question, response=answer,
                             profile={"user": "u42"})
    traces.flush()                      # ship what is spooled; whatever could not be sent stays spooled
    traces.stats()                      # {"unsent", "pending", "positive", "negative", "neutral", ...}
    traces.submit_language_feedback(trace_id, "too long, and it missed the refund policy", "negative")

`record` never talks to the network: it appends the trace to a local JSONL spool (one line, flushed and
fsynced) with a fresh `trace_id`. `flush` sends the spool in batches, oldest first; what the server accepted
leaves the spool, and what it could not reach (server down, timeout, 5xx) stays for the next `flush`. The
trace id is the idempotency key: a batch that reached the server but whose answer was lost is sent again and
stored once. A trace the server refuses as invalid (4xx) is moved to `<spool>.rejected.jsonl` with the error,
so one bad trace cannot block the others. Feedback goes through the same spool, after the trace it is about.
Several processes may share one spool: every spool change holds an exclusive `flock` on `<spool>.lock`.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

TOO_LARGE = "the request body was too large"
DEFAULT_SPOOL = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "slime" / "traces.jsonl"


class TraceClient:
    def __init__(self, url: str, api_key: str | None = None, spool: str | os.PathLike | None = None,
                 batch_size: int = 200, timeout: float = 30.0, autoflush: int | None = None):
        """url: the server root (`http://host:port`). api_key: its bearer key (default $OPENCLAW_PROXY_API_KEY).
        batch_size: traces per request (the server takes at most 1000). autoflush: `record` flushes once this
        many entries are spooled (None: only explicit `flush` calls send)."""
        if not 1 <= batch_size <= 1000:
            raise ValueError(f"batch_size must be in [1, 1000], got {batch_size}")
        self.url = url.rstrip("/").removesuffix("/v1")
        key = api_key if api_key is not None else os.environ.get("OPENCLAW_PROXY_API_KEY")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.spool = Path(os.path.expanduser(os.fspath(spool))) if spool else DEFAULT_SPOOL
        self.spool.parent.mkdir(parents=True, exist_ok=True)
        self.rejected = self.spool.with_name(self.spool.name.removesuffix(".jsonl") + ".rejected.jsonl")
        self.lock_path = self.spool.with_name(self.spool.name + ".lock")
        self.batch_size = batch_size
        self.timeout = timeout
        self.autoflush = autoflush
        self._thread_lock = threading.Lock()
        self._spooled = 0
        self._http = httpx.Client(timeout=timeout, headers=self.headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "TraceClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- the trace loop's verbs ------------------------------------------------------------------------

    def record(self, task: str | None = None, model: str | None = None, prompt: str | None = None,
               response: str | dict | None = None, profile: dict | str | None = None, *,
               messages: list[dict] | None = None, next_messages: list[dict] | None = None,
               reward: float | None = None, note: str | None = None, session_id: str | None = None,
               tools: list[dict] | None = None, trace_id: str | None = None) -> str:
        """Spool one trace and return its id. Give `prompt` (a user message) or `messages` (the conversation
        the model saw), and `response` (its reply). `reward` in [-1, 1] is an explicit verdict; `next_messages`
        what followed the reply (judged by the server); `session_id` groups the calls of one conversation."""
        if response is None:
            raise ValueError("response is required: the reply the model gave")
        if (prompt is None) == (messages is None):
            raise ValueError("give exactly one of prompt or messages")
        trace: dict[str, Any] = {"trace_id": trace_id or uuid.uuid4().hex, "response": response}
        if prompt is not None:
            trace["prompt"] = prompt
        else:
            trace["messages"] = messages
        for key, value in (("task", task), ("model", model), ("profile", profile), ("next_messages", next_messages),
                           ("reward", reward), ("note", note), ("session_id", session_id), ("tools", tools)):
            if value is not None:
                trace[key] = value
        self._append({"kind": "trace", "trace": trace, "spooled_at": time.time()})
        if self.autoflush and self._spooled >= self.autoflush:
            self.flush()
        return trace["trace_id"]

    def submit_language_feedback(self, trace_id: str, feedback: str, polarity: str | int | None = None) -> None:
        """An operator's verdict on a trace, in words (and a polarity: positive / negative / neutral). It is
        spooled behind the trace and sent by the next `flush`, which this call runs."""
        if not isinstance(feedback, str) or not feedback.strip():
            raise ValueError("feedback must be a non-empty string")
        entry = {"kind": "feedback", "trace_id": trace_id, "body": {"feedback": feedback}}
        if polarity is not None:
            entry["body"]["polarity"] = polarity
        self._append(entry)
        self.flush()

    def flush(self) -> dict:
        """Send what is spooled, oldest first. Returns {"sent", "duplicates", "rejected", "remaining",
        "error"}; "error" says why sending stopped early (the rest stays spooled)."""
        result = {"sent": 0, "duplicates": 0, "rejected": 0, "remaining": 0, "error": None}
        with self._locked():
            entries = self._read_spool()
            done = 0
            limit = self.batch_size  # halved while the server finds a batch's body too large
            while done < len(entries):
                head = entries[done]
                if head["kind"] == "feedback":
                    outcome = self._send_feedback(head)
                    step = 1
                else:
                    step = 1
                    while done + step < len(entries) and step < limit and entries[done + step]["kind"] == "trace":
                        step += 1
                    outcome = self._send_traces(entries[done:done + step], result)
                    if outcome == TOO_LARGE and step > 1:
                        limit = max(1, step // 2)
                        continue
                    if outcome == TOO_LARGE:
                        outcome = (0, {"message": "the trace alone is larger than the server's body limit"})
                if isinstance(outcome, str):  # could not reach the server: stop, keep the rest
                    result["error"] = outcome
                    break
                if outcome is not None:  # the server refused one entry: set it aside, retry the others
                    index, error = outcome
                    self._reject(entries[done + index], error)
                    del entries[done + index]
                    result["rejected"] += 1
                    continue
                if head["kind"] == "feedback":
                    result["sent"] += 1
                done += step
            self._rewrite_spool(entries[done:])
            result["remaining"] = len(entries) - done
            self._spooled = result["remaining"]
        return result

    def stats(self) -> dict:
        """Unsent traces here plus the server's counts of traces: pending (not judged yet), positive,
        negative, neutral, excluded, trained. Server counts are None while it cannot be reached."""
        with self._locked():
            unsent = sum(1 for e in self._read_spool() if e["kind"] == "trace")
        out = {"unsent": unsent, "pending": None, "positive": None, "negative": None, "neutral": None,
               "excluded": None, "trained": None, "server": None}
        try:
            resp = self._http.get(self.url + "/v1/stats")
            resp.raise_for_status()
            server = resp.json().get("traces") or {}
        except (httpx.HTTPError, ValueError) as exc:
            out["server"] = f"unreachable: {exc}"
            return out
        out.update({k: server.get(k) for k in ("positive", "negative", "neutral", "excluded", "trained")})
        out["pending"] = unsent + int(server.get("pending") or 0)
        out["server"] = server
        return out

    # --- sending ---------------------------------------------------------------------------------------

    def _send_traces(self, batch: list[dict], result: dict):
        """None when the server took the batch; (index, error) when it refused one trace; a string when it
        could not be reached (or failed on its side)."""
        body = {"traces": [e["trace"] for e in batch]}
        try:
            resp = self._http.post(self.url + "/v1/traces", json=body)
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if resp.status_code == 200:
            data = resp.json()
            result["sent"] += data.get("accepted", 0)
            result["duplicates"] += data.get("duplicates", 0)
            return None
        if resp.status_code == 413 and "traces:" not in (_error_of(resp).get("message") or ""):
            return TOO_LARGE
        if 400 <= resp.status_code < 500 and resp.status_code not in (401, 403, 408, 429):
            error = _error_of(resp)
            index = _batch_index(error.get("param"))
            if index is None or not 0 <= index < len(batch):
                if len(batch) == 1:
                    return 0, error
                return f"HTTP {resp.status_code} for a batch, naming no trace: {error.get('message')}"
            return index, error
        return f"HTTP {resp.status_code}: {_error_of(resp).get('message')}"

    def _send_feedback(self, entry: dict):
        try:
            resp = self._http.post(f"{self.url}/v1/traces/{entry['trace_id']}/feedback", json=entry["body"])
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if resp.status_code == 200:
            return None
        if 400 <= resp.status_code < 500 and resp.status_code not in (401, 403, 408, 429):
            return 0, _error_of(resp)
        return f"HTTP {resp.status_code}: {_error_of(resp).get('message')}"

    # --- the spool -------------------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, open(self.lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _append(self, entry: dict) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._locked():
            with open(self.spool, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())  # recorded means on disk: a crash right after record() loses nothing
            self._spooled += 1  # this process's appends since its last flush (autoflush's counter)

    def _read_spool(self) -> list[dict]:
        if not self.spool.exists():
            return []
        entries = []
        with open(self.spool, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    entries.append(json.loads(line))
                except ValueError:  # a torn last line from a crash mid-append: keep it aside, not lost
                    self._reject({"kind": "unparseable", "line": line}, {"message": "not JSON"})
        return entries

    def _rewrite_spool(self, entries: list[dict]) -> None:
        tmp = self.spool.with_name(self.spool.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for entry in entries:
                fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.spool)

    def _reject(self, entry: dict, error: dict) -> None:
        with open(self.rejected, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**entry, "error": error, "rejected_at": time.time()}, ensure_ascii=False) + "\n")


def _error_of(resp: httpx.Response) -> dict:
    try:
        error = resp.json().get("error")
        if isinstance(error, dict):
            return error
    except ValueError:
        pass
    return {"message": resp.text[:500], "param": None}


def _batch_index(param: str | None) -> int | None:
    """`traces[7].response` -> 7."""
    if not param or not param.startswith("traces["):
        return None
    try:
        return int(param[len("traces["):param.index("]")])
    except ValueError:
        return None
