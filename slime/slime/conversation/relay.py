"""Forwarding one chat completion to the policy engine and keeping what the engine sampled.

The proxy always asks the engine for per-token log-probs and the exact token ids (prompt and output),
so a training sample is built from what the model produced, not from a re-rendering of the parsed
message (upstream re-rendered it, so the trained ids were not the sampled ones). The client gets the OpenAI response it asked for: those extra fields are
removed again unless it requested them, and every response (and stream chunk) carries the session id.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

# Keys that steer the proxy, never the model (upstream's body fallbacks for the X-* headers).
PROXY_BODY_KEYS = ("session_id", "turn_type", "session_done")


@dataclass
class ForwardPolicy:
    """Limits the proxy enforces on every forwarded request."""

    served_model_name: str | None = None
    max_response_tokens: int | None = None  # cap on max_completion_tokens / max_tokens
    temperature: float | None = None  # forced sampling temperature (the trainer's); None keeps the client's


@dataclass
class ClientWants:
    """What the client asked for, so that the forced extras can be taken out of its answer."""

    stream: bool
    logprobs: bool
    top_logprobs: int | None
    token_ids: bool
    usage_in_stream: bool


def build_forward_body(body: dict, policy: ForwardPolicy) -> tuple[dict, ClientWants]:
    wants = ClientWants(
        stream=bool(body.get("stream")),
        logprobs=bool(body.get("logprobs")),
        top_logprobs=body.get("top_logprobs"),
        token_ids=bool(body.get("return_token_ids")),
        usage_in_stream=bool((body.get("stream_options") or {}).get("include_usage")),
    )
    forward = {k: v for k, v in body.items() if k not in PROXY_BODY_KEYS}
    forward["logprobs"] = True
    forward["return_token_ids"] = True
    if wants.stream:
        forward["stream_options"] = {"include_usage": True}
    else:
        forward.pop("stream_options", None)
    if policy.served_model_name and not forward.get("model"):
        forward["model"] = policy.served_model_name
    if policy.max_response_tokens is not None:
        for key in ("max_completion_tokens", "max_tokens"):
            if isinstance(forward.get(key), int) and forward[key] > policy.max_response_tokens:
                forward[key] = policy.max_response_tokens
        if forward.get("max_completion_tokens") is None and forward.get("max_tokens") is None:
            forward["max_completion_tokens"] = policy.max_response_tokens
    if policy.temperature is not None:
        # The trainer scores old log-probs at its rollout temperature; sampling at another temperature
        # (or with truncation) would make the behaviour policy differ from the one trained.
        forward["temperature"] = policy.temperature
        forward.pop("top_p", None)
        forward.pop("top_k", None)
    return forward, wants


@dataclass
class SampledTurn:
    """What the engine produced for one request: the assistant message and its exact tokens."""

    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    # text arrives a token at a time: kept as pieces and joined once (`+=` on an attribute copies the whole
    # string for every token, quadratic in the reply's length)
    content_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict] = field(default_factory=dict)
    finish_reason: str | None = None
    weight_version: str | None = None
    usage: dict | None = None
    complete: bool = False

    @property
    def content(self) -> str:
        return "".join(self.content_parts)

    @content.setter
    def content(self, text: str) -> None:
        self.content_parts = [text] if text else []

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    @reasoning.setter
    def reasoning(self, text: str) -> None:
        self.reasoning_parts = [text] if text else []

    def message(self) -> dict:
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        content, reasoning = self.content, self.reasoning
        msg = {"role": "assistant", "content": content if (content or not calls) else None}
        if reasoning:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = calls
        return msg

    # --- non-streaming ---------------------------------------------------------------------
    def absorb_response(self, data: dict) -> None:
        self.prompt_ids = list(data.get("prompt_token_ids") or [])
        self.weight_version = _version(data.get("weight_version"))
        self.usage = data.get("usage")
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        self.content = message.get("content") or ""
        self.reasoning = message.get("reasoning_content") or ""
        for i, call in enumerate(message.get("tool_calls") or []):
            self.tool_calls[i] = {"id": call.get("id"), "type": "function", "function": dict(call.get("function") or {})}
        self.response_ids = list(choice.get("token_ids") or [])
        self.response_logprobs = [float(e.get("logprob", 0.0)) for e in ((choice.get("logprobs") or {}).get("content") or [])]
        self.finish_reason = choice.get("finish_reason")
        self.complete = True

    # --- streaming -------------------------------------------------------------------------
    def absorb_chunk(self, chunk: dict) -> None:
        # runs once per streamed token on the event loop: plain lookups, no copies (see bench/proxy_capacity.py)
        get = chunk.get
        prompt_ids = get("prompt_token_ids")
        if prompt_ids is not None:
            self.prompt_ids = prompt_ids  # freshly parsed from the engine's bytes: ours to keep
        version = get("weight_version")
        if version is not None:
            self.weight_version = str(version)
        if get("usage"):
            self.usage = chunk["usage"]
        for choice in get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # only the first choice becomes a turn (OpenClaw never asks for n > 1)
            delta = choice.get("delta")
            if delta:
                text = delta.get("content")
                if text:
                    self.content_parts.append(text)
                text = delta.get("reasoning_content")
                if text:
                    self.reasoning_parts.append(text)
                calls = delta.get("tool_calls")
                if calls:
                    self._absorb_tool_calls(calls)
            ids = choice.get("token_ids")
            if ids:
                self.response_ids += ids
            logprobs = choice.get("logprobs")
            if logprobs:
                entries = logprobs.get("content")
                if entries:
                    self.response_logprobs += [float(e.get("logprob", 0.0)) for e in entries]
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _absorb_tool_calls(self, calls: list[dict]) -> None:
        for call in calls:
            slot = self.tool_calls.setdefault(call.get("index", len(self.tool_calls)),
                                              {"id": None, "type": "function",
                                               "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            fn = call.get("function") or {}
            if fn.get("name"):
                slot["function"]["name"] += fn["name"]
            if fn.get("arguments"):
                slot["function"]["arguments"] += fn["arguments"]


def _version(value) -> str | None:
    return None if value is None else str(value)


def client_response(data: dict, wants: ClientWants, session_id: str) -> dict:
    """The engine's non-streaming JSON as the client asked for it, plus the session id."""
    out = copy.copy(data)
    if not wants.token_ids:
        out.pop("prompt_token_ids", None)
    choices = []
    for choice in data.get("choices") or []:
        choice = dict(choice)
        if not wants.token_ids:
            choice.pop("token_ids", None)
        if not wants.logprobs:
            choice["logprobs"] = None
        choices.append(choice)
    out["choices"] = choices
    out["session_id"] = session_id
    return out


def client_chunk(chunk: dict, wants: ClientWants, session_id: str) -> dict | None:
    """One engine stream chunk as the client asked for it; None when nothing is left to send.

    The chunk is edited in place (call `SampledTurn.absorb_chunk` on it first): it was parsed for this one
    purpose, and copying it for every streamed token cost more than the edit itself."""
    choices = chunk.get("choices")
    if not choices and chunk.get("usage") is not None:
        if not wants.usage_in_stream:
            return None
        chunk.pop("prompt_token_ids", None)
        chunk["session_id"] = session_id
        return chunk
    if not wants.token_ids:
        chunk.pop("prompt_token_ids", None)
    kept = []
    for choice in choices or ():
        if not wants.token_ids:
            choice.pop("token_ids", None)
        if not wants.logprobs:
            choice["logprobs"] = None
        if not choice.get("delta") and choice.get("finish_reason") is None and choice.get("logprobs") is None \
                and "token_ids" not in choice:
            continue  # a chunk that only carried the forced extras
        kept.append(choice)
    if not kept:
        return None
    chunk["choices"] = kept
    chunk["session_id"] = session_id
    return chunk
