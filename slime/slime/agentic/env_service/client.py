"""The rollout side's client of the environment service (a pool server or the router: same contract).

Retries only where repeating cannot do a thing twice (upstream retried `exec_tool` on any error and so ran
commands twice):

* every call: a connection that could not be opened (the request never left) is retried;
* `allocate` (always sent with a request_id, so the server returns the same lease for a repeat): also a 429
  (back-pressure: waited out for up to `allocate_wait_s`, 30 min by default, longer than a pool's idle-lease reaping,
  at a backoff growing from `allocate_backoff_s` to 5 s; `allocate_retries` bounds the count too when given), a lost
  answer and a 5xx. A rollout or an evaluation may start more episodes than the service has slots (an evaluation
  starts all of its episodes at once): those wait for a slot, rather than fail;
* `keep_alive(lease)`: heartbeats while the caller waits on its policy (the agent loops wrap every generation);
* `heartbeat`, `status`, `reset` (a reset starts the environment over: twice is the same as once) and `close`
  (an unknown lease counts as closed): also a lost answer and a 5xx;
* `exec_tool` and `evaluate`: nothing more. A lost answer is an error the episode has to handle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid

import httpx

logger = logging.getLogger(__name__)
KEEP_ALIVE_S = 60.0  # a tenth of the pools' default idle TTL


class EnvServiceError(RuntimeError):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class EnvClient:
    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 900.0, retries: int = 3,
                 allocate_retries: int | None = None, allocate_wait_s: float = 1800.0,
                 allocate_backoff_s: float = 1.0, backoff_s: float = 0.2,
                 client: httpx.AsyncClient | None = None):
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._own_client = client is None
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5.0), headers=headers)
        self.retries, self.allocate_retries, self.allocate_wait_s = retries, allocate_retries, allocate_wait_s
        self.allocate_backoff_s, self.backoff_s = allocate_backoff_s, backoff_s
        self.counters = {"retried": 0, "back_pressure": 0}

    async def aclose(self) -> None:
        if self._own_client:
            await self.client.aclose()

    async def __aenter__(self) -> EnvClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _post(self, path: str, body: dict, *, idempotent: bool, wait_429: bool = False) -> dict:
        attempt, throttled = 0, 0
        deadline = asyncio.get_running_loop().time() + self.allocate_wait_s
        while True:
            try:
                reply = await self.client.post(self.url + path, json=body)
            except httpx.ConnectError as e:  # never sent: safe to repeat for any call
                error = e
            except httpx.TransportError as e:  # maybe sent, answer lost
                if not idempotent:
                    raise EnvServiceError(0, "TRANSPORT", f"{path}: {e!r} (not retried: the call may have run)") from e
                error = e
            else:
                payload = _payload(reply)
                if reply.status_code == 200 and payload.get("ok", False):
                    return payload
                code, message = payload.get("code", "ERROR"), payload.get("error", reply.text[:500])
                if reply.status_code == 429 and wait_429 and self._wait_more(throttled, deadline):
                    self.counters["back_pressure"] += 1
                    await asyncio.sleep(min(5.0, self.allocate_backoff_s * 1.5 ** throttled))
                    throttled += 1
                    continue
                if not (idempotent and reply.status_code >= 500 and reply.status_code != 504):
                    raise EnvServiceError(reply.status_code, code, message)
                error = EnvServiceError(reply.status_code, code, message)
            attempt += 1
            if attempt > self.retries:
                raise error if isinstance(error, EnvServiceError) else EnvServiceError(
                    0, "TRANSPORT", f"{path}: {error!r} after {attempt} attempts") from error
            self.counters["retried"] += 1
            await asyncio.sleep(self.backoff_s * attempt)

    def _wait_more(self, throttled: int, deadline: float) -> bool:
        if self.allocate_retries is not None and throttled >= self.allocate_retries:
            return False
        return asyncio.get_running_loop().time() < deadline

    async def allocate(self, task_key: str, request_id: str | None = None) -> dict:
        """`{lease_id, reused}`; waits out 429s (see the module's docstring)."""
        body = {"task_key": task_key, "request_id": request_id or uuid.uuid4().hex}
        return await self._post("/allocate", body, idempotent=True, wait_429=True)

    async def heartbeat(self, lease_id: str) -> None:
        await self._post("/heartbeat", {"lease_id": lease_id}, idempotent=True)

    @contextlib.asynccontextmanager
    async def keep_alive(self, lease_id: str, every_s: float = KEEP_ALIVE_S):
        """Heartbeats for `lease_id` every `every_s` seconds while the body runs: a lease waiting on a slow policy
        (a 0.5B model's step on two CPU cores, a queue of episodes in one engine) is in use, not idle, and must not be
        reaped by the pool's idle TTL (10 min by default) between two calls. A failed heartbeat is logged and the
        body goes on: the episode's next call reports a lease that is really gone."""
        async def beat() -> None:
            while True:
                await asyncio.sleep(every_s)
                try:
                    await self.heartbeat(lease_id)
                except Exception as e:  # noqa: BLE001 - the next real call on the lease surfaces it
                    logger.warning("env client: heartbeat of lease %s failed: %r", lease_id, e)

        task = asyncio.create_task(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def reset(self, lease_id: str, task_meta: dict | None = None, run_ctx: dict | None = None,
                    task_timeouts: dict | None = None) -> dict:
        body = {"lease_id": lease_id, "task_meta": task_meta or {}, "run_ctx": run_ctx or {},
                "task_timeouts": task_timeouts or {}}
        return await self._post("/reset", body, idempotent=True)

    async def exec_tool(self, lease_id: str, name: str, arguments: dict) -> dict:
        return await self._post("/exec_tool", {"lease_id": lease_id, "tool_call": {"name": name,
                                                                                   "arguments": arguments}},
                                idempotent=False)

    async def evaluate(self, lease_id: str, **request) -> dict:
        return await self._post("/evaluate", {"lease_id": lease_id, **request}, idempotent=False)

    async def close(self, lease_id: str) -> bool:
        """True if the lease was open; an unknown lease (already closed or reaped) is not an error."""
        try:
            return bool((await self._post("/close", {"lease_id": lease_id}, idempotent=True)).get("found"))
        except EnvServiceError as e:
            if e.code == "UNKNOWN_LEASE":
                return False
            raise

    async def status(self) -> dict:
        for attempt in range(self.retries + 1):
            try:
                reply = await self.client.get(self.url + "/status")
                if reply.status_code == 200:
                    return reply.json()
                error = EnvServiceError(reply.status_code, "STATUS", reply.text[:500])
            except httpx.TransportError as e:
                error = e
            await asyncio.sleep(self.backoff_s * (attempt + 1))
        raise error if isinstance(error, EnvServiceError) else EnvServiceError(0, "TRANSPORT", repr(error))


def _payload(reply: httpx.Response) -> dict:
    try:
        payload = reply.json()
    except ValueError:
        return {"ok": False, "code": "NOT_JSON", "error": reply.text[:500]}
    return payload if isinstance(payload, dict) else {"ok": False, "code": "NOT_OBJECT", "error": str(payload)[:500]}
