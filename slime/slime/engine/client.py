"""The one client for talking to an inference engine over the SGLang HTTP protocol.

Every component (rollout workers, the trainer's teacher scoring, weight sync, scripts, tests) goes through
`AsyncEngineClient` or its synchronous twin `EngineClient`, so the engine can be our embedded CPU engine
or real SGLang without anyone else noticing.

Both clients share everything except the transport: request bodies, response parsing, SSE line parsing
and retry decisions are pure functions in this module; each class only sends bytes and sleeps.

Retry safety, in one place (`should_retry`):
  * the request provably never reached the engine (connect error/timeout, no pooled connection)
    -> any call may be resent;
  * the engine answered 429/503 -> it refused before doing any work, any call may be resent
    (after its Retry-After, capped at 30 s);
  * the request may have been delivered (read timeout, dropped connection, 502/504 from a proxy)
    -> only calls that change no server state are resent. Generation and scoring are side-effect free;
    `update_weights_from_disk` is not (it bumps the served weight version), so it is never resent then;
  * any other error status is final.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import httpx

__all__ = [
    "AsyncEngineClient",
    "EngineCall",
    "EngineClient",
    "EngineError",
    "RetryPolicy",
    "ScoreResult",
    "SSE_DONE",
    "build_generate_body",
    "error_from_response",
    "invalid_response",
    "json_or_message",
    "parse_retry_after",
    "parse_score",
    "parse_sse_line",
    "retry_delay",
    "should_retry",
]

DIALECTS = ("sglang", "vllm")  # what the engine speaks; vllm is translated (slime.engine.vllm_dialect)


def engine_dialect(kind: str) -> str:
    """The client dialect for an engine kind (--rollout-engine / --prm-engine): all but vLLM speak SGLang's."""
    return "vllm" if kind == "vllm" else "sglang"
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 600.0
RETRY_AFTER_CAP = 30.0
PROBE_TIMEOUT = 30.0
# Below uvicorn's default 5 s keep-alive: reusing a connection the server is closing fails in a way that
# looks like "maybe delivered", which we may not retry for weight updates.
KEEPALIVE_EXPIRY = 4.0

REFUSED_STATUSES = frozenset({429, 503})  # engine refused before doing any work
GATEWAY_STATUSES = frozenset({502, 504})  # a proxy gave up; the engine may have done the work
_NOT_DELIVERED = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_MAYBE_DELIVERED = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class EngineError(Exception):
    """An engine call failed: an error status, an unusable response, or a transport failure.

    `status_code` is None for transport failures (the httpx exception is the `__cause__`). `body` is the
    parsed response body (or its text); `message`/`type`/`param`/`code` come from the OpenAI error shape
    `{"error": {...}}` when the engine used it.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        error_type: str | None = None,
        param: str | None = None,
        code: int | str | None = None,
        body: Any = None,
        retry_after: float | None = None,
        request: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.type = error_type
        self.param = param
        self.code = code
        self.body = body
        self.retry_after = retry_after
        self.request = request  # e.g. "POST /generate"
        self.attempts = 1

    @property
    def retryable(self) -> bool:
        """Whether resending is safe for every call, including ones that change server state."""
        return should_retry(self, idempotent=False)

    def __str__(self) -> str:
        head = " ".join(
            part
            for part in (self.request, f"HTTP {self.status_code}" if self.status_code else None, self.type)
            if part
        )
        text = f"{head}: {self.message}" if head else self.message
        return f"{text} (after {self.attempts} attempts)" if self.attempts > 1 else text


def error_from_response(response: httpx.Response, request: str | None = None) -> EngineError:
    """Build the EngineError for an error response whose body has been read."""
    text = response.text
    try:
        body: Any = response.json()
    except ValueError:
        body = text
    message = text.strip() or response.reason_phrase or "error"
    error_type = param = code = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or message)
            error_type, param, code = err.get("type"), err.get("param"), err.get("code")
        elif isinstance(err, str):
            message = err
        elif body.get("message") or body.get("detail"):
            # SGLang's {"success": false, "message": ...} and FastAPI's {"detail": ...}
            message = str(body.get("message") or body.get("detail"))
    return EngineError(
        message,
        status_code=response.status_code,
        error_type=error_type,
        param=param,
        code=code,
        body=body,
        retry_after=parse_retry_after(response.headers.get("retry-after")),
        request=request,
    )


def invalid_response(message: str, body: Any = None) -> EngineError:
    """The error for an engine answer that does not have the expected shape."""
    return EngineError(message, error_type="invalid_response", body=body)


# --------------------------------------------------------------------------------------------------
# Retry decisions (pure)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to resend a call that `should_retry` allows. max_attempts=1 disables."""

    max_attempts: int = 5
    backoff_initial: float = 0.2
    backoff_max: float = 5.0

    def __post_init__(self):
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based), when the engine gave no Retry-After."""
        ceiling = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
        # Jitter keeps many rollout workers from hammering a recovering engine in lockstep.
        return random.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP-date); None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def should_retry(failure: BaseException | int, idempotent: bool) -> bool:
    """Whether a call that failed this way may be resent.

    `failure` is an HTTP status, an EngineError, or an httpx transport exception. `idempotent` says the
    call changes no server state, so running it twice is harmless.
    """
    if isinstance(failure, EngineError):
        if failure.status_code is not None:
            failure = failure.status_code
        elif isinstance(failure.__cause__, httpx.TransportError):
            failure = failure.__cause__
        else:
            return False
    if isinstance(failure, int):
        return failure in REFUSED_STATUSES or (idempotent and failure in GATEWAY_STATUSES)
    if isinstance(failure, _NOT_DELIVERED):
        return True
    if isinstance(failure, _MAYBE_DELIVERED):
        return idempotent
    return False


def retry_delay(policy: RetryPolicy, attempt: int, failure: BaseException | int, idempotent: bool) -> float | None:
    """Seconds to wait before resending after failed attempt `attempt` (1-based), or None to give up."""
    if attempt >= policy.max_attempts or not should_retry(failure, idempotent):
        return None
    retry_after = getattr(failure, "retry_after", None)
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP)
    return policy.backoff(attempt)


def _final_error(failure: BaseException, call: EngineCall, attempts: int) -> EngineError:
    if isinstance(failure, EngineError):
        error = failure
    else:
        error = EngineError(
            f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__,
            error_type=type(failure).__name__,
        )
        error.__cause__ = failure
    error.request = error.request or call.label
    error.attempts = attempts
    return error


# --------------------------------------------------------------------------------------------------
# Requests and responses (pure)
# --------------------------------------------------------------------------------------------------


def build_generate_body(
    input_ids: Sequence[int] | Sequence[Sequence[int]] | None = None,
    text: str | Sequence[str] | None = None,
    sampling_params: dict | None = None,
    return_logprob: bool = False,
    logprob_start_len: int = -1,
    top_logprobs_num: int = 0,
    stream: bool = False,
    extra: dict | None = None,
) -> dict:
    """The JSON body of POST /generate. `extra` carries further engine fields but may not override these."""
    if (input_ids is None) == (text is None):
        raise ValueError("pass exactly one of input_ids and text")
    body = {
        "input_ids" if input_ids is not None else "text": input_ids if input_ids is not None else text,
        "sampling_params": dict(sampling_params or {}),
        "return_logprob": return_logprob,
        "logprob_start_len": logprob_start_len,
        "top_logprobs_num": top_logprobs_num,
        "stream": stream,
    }
    clash = sorted((extra or {}).keys() & body.keys())
    if clash:
        raise ValueError(f"extra fields {clash} clash with named arguments" + (
            " (use generate_stream() to stream)" if "stream" in clash else ""))
    return {**body, **(extra or {})}


@dataclass
class ScoreResult:
    """Teacher logprobs of a response: entry i belongs to response token i (no shift, nothing dropped)."""

    logprobs: list[float]
    top_logprobs: list[list[tuple[float, int]]] | None
    weight_version: str


def parse_score(payload: Any, response_ids: Sequence[int], top_logprobs_num: int = 0) -> ScoreResult:
    """Turn a /generate scoring response into a ScoreResult, checking it lines up with `response_ids`.

    The request asked for input logprobs from position len(prompt) on, so the engine must return exactly
    one entry per response token, carrying that token's id. Anything else is an alignment bug and raises.
    """
    if not isinstance(payload, dict):
        raise invalid_response(f"expected one result object, got {type(payload).__name__}", payload)
    meta = payload.get("meta_info")
    entries = meta.get("input_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(entries, list):
        raise invalid_response("response has no meta_info.input_token_logprobs", payload)
    expected = [int(t) for t in response_ids]
    if len(entries) != len(expected):
        raise invalid_response(
            f"engine returned {len(entries)} input logprobs for {len(expected)} response tokens; "
            "expected exactly one per response token (logprob_start_len misaligned?)",
            payload,
        )
    try:
        logprobs = [entry[0] for entry in entries]
        ids = [int(entry[1]) for entry in entries]
    except (TypeError, IndexError, ValueError) as exc:
        raise invalid_response(f"malformed input_token_logprobs: {exc}", payload) from None
    if ids != expected:
        i = next(i for i, (got, want) in enumerate(zip(ids, expected)) if got != want)
        raise invalid_response(
            f"token id mismatch at response position {i}: engine scored {ids[i]}, expected {expected[i]} "
            f"(engine ids start {ids[:5]}, response starts {expected[:5]})",
            payload,
        )
    if any(lp is None for lp in logprobs):
        raise invalid_response(f"missing logprob at response position {logprobs.index(None)}", payload)

    top = None
    if top_logprobs_num > 0:
        raw = meta.get("input_top_logprobs")
        if not isinstance(raw, list) or len(raw) != len(expected):
            raise invalid_response(
                f"expected {len(expected)} input_top_logprobs positions, got "
                f"{len(raw) if isinstance(raw, list) else type(raw).__name__}",
                payload,
            )
        try:
            top = [[(float(c[0]), int(c[1])) for c in position or []] for position in raw]
        except (TypeError, IndexError, ValueError) as exc:
            raise invalid_response(f"malformed input_top_logprobs: {exc}", payload) from None

    return ScoreResult(
        logprobs=[float(lp) for lp in logprobs],
        top_logprobs=top,
        weight_version=str(meta.get("weight_version") or ""),
    )


class _Done:
    def __repr__(self) -> str:
        return "SSE_DONE"


SSE_DONE = _Done()
"""Returned by parse_sse_line for `data: [DONE]`, the end of a stream."""


def parse_sse_line(line: str) -> dict | None | _Done:
    """One line of an engine event stream: its JSON object, SSE_DONE, or None for lines to skip.

    Both our engine and SGLang put each event's JSON on one `data:` line. An error event raises.
    """
    line = line.rstrip("\r\n")
    if not line or line.startswith(":"):
        return None
    field, _, value = line.partition(":")
    if field in ("event", "id", "retry"):
        return None
    if field != "data":
        raise invalid_response(f"unexpected line in event stream: {line[:200]!r}")
    value = value[1:] if value.startswith(" ") else value
    if value.strip() == "[DONE]":
        return SSE_DONE
    try:
        event = json.loads(value)
    except ValueError:
        raise invalid_response(f"event is not JSON: {value[:200]!r}") from None
    if not isinstance(event, dict):
        raise invalid_response(f"event is not a JSON object: {value[:200]!r}", event)
    err = event.get("error")
    if isinstance(err, dict | str):
        detail = err if isinstance(err, dict) else {"message": err}
        raise EngineError(
            str(detail.get("message") or "error event in stream"),
            error_type=detail.get("type"),
            param=detail.get("param"),
            code=detail.get("code"),
            body=event,
        )
    return event


def _json_payload(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise invalid_response(
            f"engine answered HTTP {response.status_code} with a non-JSON body: {response.text[:200]!r}"
        ) from None


def json_or_message(response: httpx.Response) -> Any:
    """The JSON body, or `{"message": text}` when the body is not JSON (real SGLang answers /flush_cache with
    plain text)."""
    try:
        return response.json()
    except ValueError:
        return {"message": response.text}


def _check_update(response: httpx.Response) -> dict:
    payload = _json_payload(response)
    if not isinstance(payload, dict) or payload.get("success") is not True:
        # SGLang's weight routes say {"message"}, its LoRA routes {"error_message"}
        message = (payload.get("message") or payload.get("error_message")) if isinstance(payload, dict) else None
        raise EngineError(str(message or "weight update failed"), error_type="update_failed", body=payload)
    return payload


def _weight_version(response: httpx.Response) -> str:
    payload = _json_payload(response)
    if not isinstance(payload, dict) or payload.get("weight_version") is None:
        raise invalid_response("response has no weight_version", payload)
    return str(payload["weight_version"])


@dataclass(frozen=True)
class EngineCall:
    """One engine call, free of transport: what to send, whether resending is harmless, how to read the answer."""

    method: str
    path: str
    body: dict | None = None
    idempotent: bool = True
    parse: Callable[[httpx.Response], Any] = _json_payload

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    def finish(self, response: httpx.Response) -> Any:
        try:
            return self.parse(response)
        except EngineError as error:
            error.request = error.request or self.label
            raise


def _generate_call(input_ids, text, sampling_params, return_logprob, logprob_start_len, top_logprobs_num, extra,
                   stream=False) -> EngineCall:
    body = build_generate_body(input_ids, text, sampling_params, return_logprob, logprob_start_len,
                               top_logprobs_num, stream, extra)
    return EngineCall("POST", "/generate", body)


def _score_call(prompt_ids: Sequence[int], response_ids: Sequence[int], temperature: float,
                top_logprobs_num: int) -> EngineCall:
    if len(prompt_ids) == 0:
        raise ValueError("score() needs a non-empty prompt: the first position has no logprob")
    if len(response_ids) == 0:
        raise ValueError("score() needs a non-empty response")
    body = build_generate_body(
        input_ids=[int(t) for t in prompt_ids] + [int(t) for t in response_ids],
        sampling_params={"max_new_tokens": 0, "temperature": temperature},
        return_logprob=True,
        logprob_start_len=len(prompt_ids),
        top_logprobs_num=top_logprobs_num,
    )
    expected = list(response_ids)
    return EngineCall("POST", "/generate", body,
                      parse=lambda response: parse_score(_json_payload(response), expected, top_logprobs_num))


def _chat_call(body: dict, stream: bool) -> EngineCall:
    if not stream and body.get("stream"):
        raise ValueError("use chat_stream() to stream")
    return EngineCall("POST", "/v1/chat/completions", {**body, "stream": stream})


def _update_weights_call(model_path: str, weight_version: str | int | None) -> EngineCall:
    body = {"model_path": model_path}
    if weight_version is not None:
        body["weight_version"] = str(weight_version)
    return EngineCall("POST", "/update_weights_from_disk", body, idempotent=False, parse=_check_update)


def _lora_load_call(lora_name: str, lora_path: str) -> EngineCall:
    return EngineCall("POST", "/load_lora_adapter", {"lora_name": lora_name, "lora_path": lora_path}, idempotent=False,
                      parse=_check_update)


def _lora_unload_call(lora_name: str) -> EngineCall:
    return EngineCall("POST", "/unload_lora_adapter", {"lora_name": lora_name}, idempotent=False, parse=_check_update)


# SGLang's distributed weight update (GPU): the engine joins an NCCL group that the trainer opened, then receives
# each bucket of tensors by broadcast from trainer rank 0. None of these may be resent: the engine may already be
# inside a collective.
def _init_group_call(master_address: str, master_port: int, rank_offset: int, world_size: int,
                     group_name: str, backend: str) -> EngineCall:
    body = {"master_address": master_address, "master_port": int(master_port), "rank_offset": int(rank_offset),
            "world_size": int(world_size), "group_name": group_name, "backend": backend}
    return EngineCall("POST", "/init_weights_update_group", body, idempotent=False, parse=_check_update)


def _update_distributed_call(names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]],
                             group_name: str, weight_version: str | int | None, flush_cache: bool) -> EngineCall:
    if not len(names) == len(dtypes) == len(shapes):
        raise ValueError(f"names, dtypes and shapes differ in length: {len(names)}, {len(dtypes)}, {len(shapes)}")
    body = {"names": list(names), "dtypes": list(dtypes), "shapes": [[int(d) for d in s] for s in shapes],
            "group_name": group_name, "flush_cache": flush_cache}
    if weight_version is not None:
        body["weight_version"] = str(weight_version)
    return EngineCall("POST", "/update_weights_from_distributed", body, idempotent=False, parse=_check_update)


def _destroy_group_call(group_name: str) -> EngineCall:
    return EngineCall("POST", "/destroy_weights_update_group", {"group_name": group_name}, idempotent=False,
                      parse=_check_update)


_FLUSH_CACHE = EngineCall("POST", "/flush_cache", parse=json_or_message)
_MODELS = EngineCall("GET", "/v1/models")
_MODEL_INFO = EngineCall("GET", "/get_model_info")
_WEIGHT_VERSION = EngineCall("GET", "/get_weight_version", parse=_weight_version)


def weight_version_number(version: str | int | None) -> int:
    """The count a weight version label stands for: its number, or 0 for a label that is none (a fresh vLLM reports
    "default" until its first update; SGLang and our engine count from "0"). The trainer numbers what it publishes
    from there."""
    text = str(version if version is not None else "").strip()
    return int(text) if text.isdigit() else 0


def _note_cleanup_failure(failure: BaseException, cleanup: EngineCall, also: Exception) -> None:
    """An update step failed and the call that must follow it (vLLM's /resume) failed too: the step's error is the
    one raised (it names the cause, e.g. the reload's 500); the cleanup's is attached, since it means the engine may
    still be paused or may have died with the update."""
    failure.add_note(f"then {cleanup.label} failed too: {also} (the engine may be paused, or gone)")


def _is_up(probe: int | Exception) -> bool:
    return isinstance(probe, int) and 200 <= probe < 300


def _probe_timeout(deadline: float) -> float:
    return min(PROBE_TIMEOUT, max(deadline - time.monotonic(), 0.05))


def _not_ready(base_url: str, timeout: float, probe: int | Exception) -> TimeoutError:
    last = f"HTTP {probe}" if isinstance(probe, int) else f"{type(probe).__name__}: {probe}"
    return TimeoutError(f"engine at {base_url} not ready after {timeout:g} s (last probe: {last})")


# --------------------------------------------------------------------------------------------------
# Transports
# --------------------------------------------------------------------------------------------------


class _ClientBase:
    _http_class: type[httpx.Client] | type[httpx.AsyncClient]

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_READ_TIMEOUT,
        retry: RetryPolicy = RetryPolicy(),
        max_connections: int = 256,
        dialect: str = "sglang",
    ):
        if dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {DIALECTS}, got {dialect!r}")
        self.dialect = dialect
        if "://" not in base_url:
            base_url = "http://" + base_url
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        if not isinstance(timeout, httpx.Timeout):
            connect = DEFAULT_CONNECT_TIMEOUT if timeout is None else min(DEFAULT_CONNECT_TIMEOUT, timeout)
            timeout = httpx.Timeout(timeout, connect=connect)
        self._http = self._http_class(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
            timeout=timeout,
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=KEEPALIVE_EXPIRY,
            ),
        )

    def _request(self, call: EngineCall) -> httpx.Request:
        return self._http.build_request(call.method, call.path, json=call.body)

    def _translate(self, call: EngineCall) -> EngineCall:
        if self.dialect == "vllm":
            from slime.engine.vllm_dialect import vllm_call

            return vllm_call(call)
        return call

    def _update_steps(self, model_path: str, weight_version) -> tuple[list[EngineCall], EngineCall | None]:
        """The calls of one update from disk, and the one that must run even when they fail."""
        if self.dialect == "vllm":
            from slime.engine.vllm_dialect import vllm_update_calls

            return vllm_update_calls(model_path, weight_version)
        return [_update_weights_call(model_path, weight_version)], None

    @staticmethod
    def _update_result(results: list, model_path: str, weight_version) -> dict:
        if len(results) == 1:
            return results[0]
        return {"success": True, "message": f"reloaded {model_path}", "weight_version":
                None if weight_version is None else str(weight_version)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"


class AsyncEngineClient(_ClientBase):
    """Async engine client over one pooled httpx.AsyncClient. Use as `async with AsyncEngineClient(url) as c:`.

    `timeout` is a float (read/write/pool seconds; connect capped at 10 s) or an httpx.Timeout.
    """

    _http_class = httpx.AsyncClient

    async def __aenter__(self) -> AsyncEngineClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def generate(self, input_ids=None, text=None, sampling_params=None, return_logprob=False,
                       logprob_start_len=-1, top_logprobs_num=0, **extra) -> dict | list[dict]:
        """POST /generate. A list for batched prompts or n > 1, else one result object."""
        return await self._call(_generate_call(input_ids, text, sampling_params, return_logprob,
                                               logprob_start_len, top_logprobs_num, extra))

    def generate_stream(self, input_ids=None, text=None, sampling_params=None, return_logprob=False,
                        logprob_start_len=-1, top_logprobs_num=0, **extra) -> AsyncIterator[dict]:
        """Streamed /generate: each event carries the cumulative text, output_ids and meta_info."""
        return self._stream(_generate_call(input_ids, text, sampling_params, return_logprob,
                                           logprob_start_len, top_logprobs_num, extra, stream=True))

    async def chat(self, body: dict) -> dict:
        """POST /v1/chat/completions (OpenAI shape; add "return_token_ids": true for token ids)."""
        return await self._call(_chat_call(body, stream=False))

    def chat_stream(self, body: dict) -> AsyncIterator[dict]:
        """Streamed /v1/chat/completions: the OpenAI chunk objects."""
        return self._stream(_chat_call(body, stream=True))

    async def score(self, prompt_ids: Sequence[int], response_ids: Sequence[int], temperature: float = 1.0,
                    top_logprobs_num: int = 0) -> ScoreResult:
        """Logprob of each response token given the prompt and the response before it (teacher scoring)."""
        return await self._call(_score_call(prompt_ids, response_ids, temperature, top_logprobs_num))

    async def update_weights_from_disk(self, model_path: str, weight_version: str | int | None = None) -> dict:
        """Load new weights; never resent once it may have been delivered. Raises EngineError unless success."""
        steps, always = self._update_steps(model_path, weight_version)
        try:
            results = [await self._send_call(step) for step in steps]
        except BaseException as failure:
            if always is not None:
                try:
                    await self._send_call(always)
                except Exception as also:  # noqa: BLE001 - reported with the failure that matters
                    _note_cleanup_failure(failure, always, also)
            raise
        if always is not None:
            await self._send_call(always)
        return self._update_result(results, model_path, weight_version)

    async def load_lora_adapter(self, lora_name: str, lora_path: str) -> dict:
        """Load a PEFT adapter folder under `lora_name` (SGLang needs --enable-lora); requests pick it by name."""
        return await self._call(_lora_load_call(lora_name, lora_path))

    async def unload_lora_adapter(self, lora_name: str) -> dict:
        return await self._call(_lora_unload_call(lora_name))

    async def init_weights_update_group(self, master_address: str, master_port: int, rank_offset: int,
                                        world_size: int, group_name: str = "weight_update_group",
                                        backend: str = "nccl") -> dict:
        """Make the engine join the trainer's weight-broadcast group; returns once the group has formed."""
        return await self._call(_init_group_call(master_address, master_port, rank_offset, world_size, group_name,
                                                 backend))

    async def update_weights_from_distributed(self, names, dtypes, shapes, group_name: str = "weight_update_group",
                                              weight_version: str | int | None = None,
                                              flush_cache: bool = True) -> dict:
        """Receive one bucket of tensors broadcast from group rank 0, in `names` order; returns once loaded."""
        return await self._call(_update_distributed_call(names, dtypes, shapes, group_name, weight_version,
                                                         flush_cache))

    async def destroy_weights_update_group(self, group_name: str = "weight_update_group") -> dict:
        return await self._call(_destroy_group_call(group_name))

    async def flush_cache(self) -> dict:
        return await self._call(_FLUSH_CACHE)

    async def models(self) -> dict:
        return await self._call(_MODELS)

    async def model_info(self) -> dict:
        return await self._call(_MODEL_INFO)

    async def weight_version(self) -> str:
        return await self._call(_WEIGHT_VERSION)

    async def health(self) -> bool:
        """Whether GET /health answers 2xx; False (not an exception) when the engine is unreachable."""
        return _is_up(await self._probe("/health"))

    async def health_generate(self) -> bool:
        return _is_up(await self._probe("/health_generate"))

    async def wait_until_ready(self, timeout: float = 300.0, interval: float = 1.0) -> None:
        """Poll /health_generate (or /health, for engines without it) until 2xx; TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            probe = await self._probe("/health_generate", _probe_timeout(deadline))
            if probe == 404:
                probe = await self._probe("/health", _probe_timeout(deadline))
            if _is_up(probe):
                return
            if time.monotonic() >= deadline:
                raise _not_ready(self.base_url, timeout, probe)
            await asyncio.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))

    async def _call(self, call: EngineCall) -> Any:
        return await self._send_call(self._translate(call))

    async def _send_call(self, call: EngineCall) -> Any:
        return call.finish(await self._send(call, stream=False))

    async def _send(self, call: EngineCall, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.send(self._request(call), stream=stream)
                if response.status_code < 400:
                    return response
                if stream:
                    try:
                        await response.aread()
                    finally:
                        await response.aclose()
                failure: BaseException = error_from_response(response, call.label)
            except httpx.TransportError as exc:
                failure = exc
            delay = retry_delay(self.retry, attempt, failure, call.idempotent)
            if delay is None:
                raise _final_error(failure, call, attempt)
            await asyncio.sleep(delay)

    async def _stream(self, call: EngineCall) -> AsyncIterator[dict]:
        call = self._translate(call)
        response = await self._send(call, stream=True)
        try:
            # No retries from here on: the engine is already producing output.
            async for line in response.aiter_lines():
                event = parse_sse_line(line)
                if event is SSE_DONE:
                    return
                if event is not None:
                    yield event
            raise _final_error(invalid_response("event stream ended before [DONE]"), call, 1)
        except httpx.TransportError as exc:
            raise _final_error(exc, call, 1)
        except EngineError as error:
            raise _final_error(error, call, 1)
        finally:
            await response.aclose()

    async def _probe(self, path: str, timeout: float = PROBE_TIMEOUT) -> int | Exception:
        try:
            return (await self._http.get(path, timeout=timeout)).status_code
        except httpx.TransportError as exc:
            return exc


class EngineClient(_ClientBase):
    """Synchronous twin of AsyncEngineClient (same methods; streams are plain iterators), for scripts and tests."""

    _http_class = httpx.Client

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def generate(self, input_ids=None, text=None, sampling_params=None, return_logprob=False,
                 logprob_start_len=-1, top_logprobs_num=0, **extra) -> dict | list[dict]:
        return self._call(_generate_call(input_ids, text, sampling_params, return_logprob,
                                         logprob_start_len, top_logprobs_num, extra))

    def generate_stream(self, input_ids=None, text=None, sampling_params=None, return_logprob=False,
                        logprob_start_len=-1, top_logprobs_num=0, **extra) -> Iterator[dict]:
        return self._stream(_generate_call(input_ids, text, sampling_params, return_logprob,
                                           logprob_start_len, top_logprobs_num, extra, stream=True))

    def chat(self, body: dict) -> dict:
        return self._call(_chat_call(body, stream=False))

    def chat_stream(self, body: dict) -> Iterator[dict]:
        return self._stream(_chat_call(body, stream=True))

    def score(self, prompt_ids: Sequence[int], response_ids: Sequence[int], temperature: float = 1.0,
              top_logprobs_num: int = 0) -> ScoreResult:
        return self._call(_score_call(prompt_ids, response_ids, temperature, top_logprobs_num))

    def update_weights_from_disk(self, model_path: str, weight_version: str | int | None = None) -> dict:
        steps, always = self._update_steps(model_path, weight_version)
        try:
            results = [self._send_call(step) for step in steps]
        except BaseException as failure:
            if always is not None:
                try:
                    self._send_call(always)
                except Exception as also:  # noqa: BLE001 - reported with the failure that matters
                    _note_cleanup_failure(failure, always, also)
            raise
        if always is not None:
            self._send_call(always)
        return self._update_result(results, model_path, weight_version)

    def load_lora_adapter(self, lora_name: str, lora_path: str) -> dict:
        return self._call(_lora_load_call(lora_name, lora_path))

    def unload_lora_adapter(self, lora_name: str) -> dict:
        return self._call(_lora_unload_call(lora_name))

    def init_weights_update_group(self, master_address: str, master_port: int, rank_offset: int, world_size: int,
                                  group_name: str = "weight_update_group", backend: str = "nccl") -> dict:
        return self._call(_init_group_call(master_address, master_port, rank_offset, world_size, group_name,
                                           backend))

    def update_weights_from_distributed(self, names, dtypes, shapes, group_name: str = "weight_update_group",
                                        weight_version: str | int | None = None, flush_cache: bool = True) -> dict:
        return self._call(_update_distributed_call(names, dtypes, shapes, group_name, weight_version, flush_cache))

    def destroy_weights_update_group(self, group_name: str = "weight_update_group") -> dict:
        return self._call(_destroy_group_call(group_name))

    def flush_cache(self) -> dict:
        return self._call(_FLUSH_CACHE)

    def models(self) -> dict:
        return self._call(_MODELS)

    def model_info(self) -> dict:
        return self._call(_MODEL_INFO)

    def weight_version(self) -> str:
        return self._call(_WEIGHT_VERSION)

    def health(self) -> bool:
        return _is_up(self._probe("/health"))

    def health_generate(self) -> bool:
        return _is_up(self._probe("/health_generate"))

    def wait_until_ready(self, timeout: float = 300.0, interval: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            probe = self._probe("/health_generate", _probe_timeout(deadline))
            if probe == 404:
                probe = self._probe("/health", _probe_timeout(deadline))
            if _is_up(probe):
                return
            if time.monotonic() >= deadline:
                raise _not_ready(self.base_url, timeout, probe)
            time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))

    def _call(self, call: EngineCall) -> Any:
        return self._send_call(self._translate(call))

    def _send_call(self, call: EngineCall) -> Any:
        return call.finish(self._send(call, stream=False))

    def _send(self, call: EngineCall, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.send(self._request(call), stream=stream)
                if response.status_code < 400:
                    return response
                if stream:
                    try:
                        response.read()
                    finally:
                        response.close()
                failure: BaseException = error_from_response(response, call.label)
            except httpx.TransportError as exc:
                failure = exc
            delay = retry_delay(self.retry, attempt, failure, call.idempotent)
            if delay is None:
                raise _final_error(failure, call, attempt)
            time.sleep(delay)

    def _stream(self, call: EngineCall) -> Iterator[dict]:
        call = self._translate(call)
        response = self._send(call, stream=True)
        try:
            for line in response.iter_lines():
                event = parse_sse_line(line)
                if event is SSE_DONE:
                    return
                if event is not None:
                    yield event
            raise _final_error(invalid_response("event stream ended before [DONE]"), call, 1)
        except httpx.TransportError as exc:
            raise _final_error(exc, call, 1)
        except EngineError as error:
            raise _final_error(error, call, 1)
        finally:
            response.close()

    def _probe(self, path: str, timeout: float = PROBE_TIMEOUT) -> int | Exception:
        try:
            return self._http.get(path, timeout=timeout).status_code
        except httpx.TransportError as exc:
            return exc
