"""Who is talking, and which turn comes next: request metadata and history matching, as pure functions.

Two questions the proxy asks of every `POST /v1/chat/completions`:

1. *Which session is this, and is it a main-line turn (trainable) or a side request?* Explicit tags win
   (`X-Session-Id` / `X-Turn-Type` / `X-Session-Done` headers, then the same keys in the body). The real,
   unpatched OpenClaw client sends none of them, so we infer from the request's shape: its `Runtime:` line
   names the session, its compaction and heartbeat requests have recognisable prompts. Anything we cannot
   place still gets its own session (a hash of the conversation's stable opening), so unrelated anonymous
   conversations never share one, and is trained as main, so untagged traffic is not silently dropped.
   `X-Turn-Id` (the client's id of the agent run a request belongs to) is recorded as the turn's trace id, and
   `X-Turn-Reason` (why main or side) goes into the log. A tagged request is also classified by inference, and
   `header_check` counts where the two disagree: the OpenClaw plugin `extensions/rl-training-headers` sends
   these headers, so its users check the inference on their own traffic.

2. *Is this request the next state of an earlier turn?* Only if its history is that turn's prompt plus that
   turn's response, followed by at least one new message, and the next state is ALL of those new messages.
   So a client retry or a parallel branch of the same session never becomes a "next state", and with
   parallel tool calls the judge sees every tool result. Histories are compared by fingerprint because OpenClaw
   rewrites tool-call ids (`call_3bea382a46ea` comes back as `call3bea382a46ea`) and appends a fresh
   internal-context message to every request.

Everything here is total on JSON-valid input: junk messages or content of the wrong type never raise (the
proxy validates requests separately); they simply match nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slime.conversation.openclaw_conventions import (
    is_internal_context,
    message_text,
    runtime_fields,
    strip_timestamp_prefix,
)

__all__ = [
    "InferredMeta",
    "RequestMeta",
    "history_fingerprints",
    "is_retry",
    "message_fingerprint",
    "next_state_after",
    "resolve_meta",
    "strip_internal_context",
    "turn_fingerprints",
]

OPENCLAW_DYNAMIC_MARKER = "<!-- openclaw:attempt:DYNAMIC -->"
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)

_TRUTHY = frozenset({"1", "true", "yes", "on"})

log = logging.getLogger("slime.conversation")

# words for the DEBUG log line of `resolve_meta`: where the session id came from, why main or side
SESSION_SOURCE_WORDS = {"header": "X-Session-Id header", "body": "body session_id",
                        "runtime": "OpenClaw Runtime line", "prefix": "hash of the opening (no session tag)"}
TURN_REASON_WORDS = {"header": "X-Turn-Type header", "body": "body turn_type",
                     "openclaw-main": "OpenClaw agent request (tools + agent prompt, or internal context)",
                     "openclaw-compaction": "OpenClaw compaction summary",
                     "openclaw-heartbeat": "OpenClaw heartbeat prompt",
                     "title-like": "title/summary request of a chat front-end",
                     "unclassified": "shape not recognised, trained as main"}

# W3C trace context: version-traceid-parentid-flags, lower-case hex (we also accept upper case).
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?", re.IGNORECASE)

_OPENCLAW_MAIN_SYSTEM_MARKERS = (
    "You are a personal assistant running inside OpenClaw", "<!-- openclaw:attempt:STABLE -->")
_COMPACTION_SYSTEM_PREFIX = "you are a context summarization assistant"
_SUMMARY_WORD = re.compile(r"\bsummar(?:y|i[sz]e|i[sz]ing)\b", re.IGNORECASE)
# The default heartbeat prompt of the captured version, and the one older OpenClaw versions used.
_HEARTBEAT_PROMPT_PREFIXES = ("follow the heartbeat monitor", "read heartbeat.md if it exists")

# Side tasks of generic chat front-ends (Open WebUI, LibreChat, NextChat, ...): "generate a short title for
# this chat", "summarize the conversation". A title request must also mention the conversation, so a user who
# asks for a title for their essay is still a main-line turn.
_TITLE_REQUEST = re.compile(
    r"\b(?:generate|create|write|suggest|give|provide|produce|make|come up with)\b[^\n]{0,80}?\btitles?\b",
    re.IGNORECASE)
_CONVERSATION_WORD = re.compile(r"\b(?:conversation|chat|dialog(?:ue)?|discussion|thread|exchange)s?\b", re.IGNORECASE)
_SUMMARIZE_CONVERSATION = re.compile(
    r"\bsummari[sz]e\b[^\n]{0,60}?\b(?:conversation|chat|dialog(?:ue)?|discussion|thread)s?\b", re.IGNORECASE)


# --------------------------------------------------------------------------------------------------------
# message roles and internal context


def _role(msg: Any) -> str:
    role = msg.get("role") if isinstance(msg, dict) else None
    if not isinstance(role, str):
        return ""
    role = role.strip().lower()
    return "system" if role == "developer" else role


def _as_message_list(messages: Any) -> list:
    return messages if isinstance(messages, list) else []


def strip_internal_context(messages: list[dict]) -> list[dict]:
    """`messages` without OpenClaw's trailing internal-context user message (a new list; input untouched).

    Only trailing ones go: the marker anywhere else is conversation content and stays.
    """
    messages = _as_message_list(messages)
    end = len(messages)
    while end > 0 and is_internal_context(messages[end - 1]):
        end -= 1
    return list(messages[:end])


# --------------------------------------------------------------------------------------------------------
# fingerprints and history matching


def _canonical_arguments(arguments: Any) -> str:
    """Tool-call arguments as sorted-key JSON, so key order and spacing differences do not matter."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments  # not JSON: compare the raw string
    try:
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(arguments)


def _tool_call_signatures(msg: dict) -> list[list[str]]:
    # Ids are deliberately left out: OpenClaw replays them normalised, not byte for byte.
    tool_calls = msg.get("tool_calls")
    if not isinstance(tool_calls, list):
        return []
    signatures = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            signatures.append(["", _canonical_arguments(call)])
            continue
        name = function.get("name")
        signatures.append([name if isinstance(name, str) else "", _canonical_arguments(function.get("arguments"))])
    return signatures


def message_fingerprint(msg: dict) -> str:
    """A stable hash of what a replayed message must keep: role, text and tool calls.

    developer counts as system, null content as "", surrounding whitespace is ignored, and so are tool-call
    ids, `tool_call_id`, `name` and `reasoning_content` (clients rewrite or drop them when replaying history).
    """
    if isinstance(msg, dict):
        role = _role(msg)
        text = message_text(msg)
        if role == "assistant" and "<think>" in text:
            # clients often replay a reply without its reasoning (chat templates drop it from history)
            text = _THINK_BLOCK.sub("", text)
        if role == "system" and OPENCLAW_DYNAMIC_MARKER in text:
            # OpenClaw's system prompt ends with a part that changes with the date ("Current date: ..."):
            # the conversation is the same after midnight, so only the stable part identifies it
            text = text.split(OPENCLAW_DYNAMIC_MARKER, 1)[0]
        key = [role, text.strip(), _tool_call_signatures(msg)]
    else:
        # Not a message at all: fingerprint its value so it matches only an identical junk entry.
        key = ["<junk>", _canonical_arguments(msg), []]
    encoded = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha1(encoded.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def history_fingerprints(messages: list[dict]) -> list[str]:
    """Fingerprints of the conversation proper (internal context stripped)."""
    return [message_fingerprint(m) for m in strip_internal_context(messages)]


def turn_fingerprints(prompt_messages: list[dict], response_message: dict) -> list[str]:
    """What a later request's history must start with to continue this turn: its prompt, then its response."""
    if isinstance(response_message, dict) and "role" not in response_message:
        response_message = {"role": "assistant", **response_message}
    return history_fingerprints(prompt_messages) + [message_fingerprint(response_message)]


def next_state_after(turn_fps: list[str], request_messages: list[dict]) -> list[dict] | None:
    """The messages that followed a turn's response, if this request continues that turn; else None.

    All of them: several parallel tool results, or tool results and then a user message. None for a retry
    (the same prompt again), a parallel branch (a different response), another conversation, or a history
    rewritten by compaction.
    """
    if not turn_fps:
        return None
    history = strip_internal_context(request_messages)
    if len(history) <= len(turn_fps):
        return None
    if [message_fingerprint(m) for m in history[:len(turn_fps)]] != list(turn_fps):
        return None
    return history[len(turn_fps):]


def is_retry(prompt_fps: list[str], request_messages: list[dict]) -> bool:
    """True when the request re-sends exactly an earlier prompt's history (a client retry or regenerate)."""
    return bool(prompt_fps) and history_fingerprints(request_messages) == list(prompt_fps)


# --------------------------------------------------------------------------------------------------------
# request metadata


@dataclass(frozen=True)
class RequestMeta:
    session_id: str
    session_source: str  # "header" | "body" | "runtime" (OpenClaw Runtime line) | "prefix" (hash of the opening)
    turn_type: str  # "main" | "side"
    # why: "header" / "body" (explicit), else "openclaw-main", "openclaw-compaction", "openclaw-heartbeat",
    # "title-like" or "unclassified" (inferred)
    turn_reason: str
    explicit_turn_type: bool  # the client said so (header or body) rather than us inferring it
    session_done: bool
    # shared by every model call of one agent run (tool loops): the client's `X-Turn-Id` (the rl-training-headers
    # OpenClaw plugin sends its run id there), else the W3C trace-id of a `traceparent` header
    trace_id: str | None
    turn_id: str | None = None  # X-Turn-Id as sent
    client_reason: str | None = None  # X-Turn-Reason as sent (heartbeat, compaction, user, ...): logs and stats
    # What inference from the body says, computed only when the client tagged the request (header or body),
    # so the proxy can count how often the two agree (`header_check.HeaderCheck`). None for untagged requests.
    inferred: "InferredMeta | None" = None


@dataclass(frozen=True)
class InferredMeta:
    session_id: str
    session_source: str  # "runtime" | "prefix"
    turn_type: str
    turn_reason: str


def _lower_keys(headers: Any) -> dict[str, str]:
    if isinstance(headers, Mapping):
        items = headers.items()
    elif isinstance(headers, (list, tuple)):  # raw (name, value) pairs, as in the captures
        items = [pair for pair in headers if isinstance(pair, (list, tuple)) and len(pair) == 2]
    else:
        return {}
    lowered: dict[str, str] = {}
    for key, value in items:
        if value is None:
            continue  # an unset header, not the session "None"
        if isinstance(key, bytes):
            key = key.decode("latin-1")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        # First occurrence wins, like most frameworks' single-value lookup.
        lowered.setdefault(str(key).lower(), value if isinstance(value, str) else str(value))
    return lowered


def _explicit_value(headers: dict[str, str], header: str, body: dict, key: str) -> tuple[str, str] | None:
    """(value, source) from the header, else the body key; blank values count as absent."""
    value = headers.get(header)
    if value is not None and value.strip():
        return value.strip(), "header"
    value = body.get(key)
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    value = str(value).strip()
    return (value, "body") if value else None


def _is_truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return value is not None and str(value).strip().lower() in _TRUTHY


def _session_done(headers: dict[str, str], body: dict) -> bool:
    header = headers.get("x-session-done")
    if header is not None and header.strip():
        return _is_truthy(header)
    return _is_truthy(body.get("session_done"))


def _trace_id(headers: dict[str, str]) -> str | None:
    match = _TRACEPARENT.fullmatch(headers.get("traceparent", "").strip())
    if match is None:
        return None
    version, trace_id, parent_id, _flags, suffix = match.groups()
    version, trace_id = version.lower(), trace_id.lower()
    # W3C Trace Context: version ff is invalid, version 00 has exactly four fields, all-zero ids are invalid.
    if version == "ff" or (version == "00" and suffix) or set(trace_id) == {"0"} or set(parent_id) == {"0"}:
        return None
    return trace_id


def _system_text(messages: list) -> str:
    for msg in messages:
        role = _role(msg)
        if role == "system":
            return message_text(msg)
        if role == "user":
            break  # only the opening system prompt describes the request
    return ""


def _first_user(messages: list) -> Any:
    return next((m for m in messages if _role(m) == "user"), None)


def _last_user(messages: list) -> Any:
    return next((m for m in reversed(messages) if _role(m) == "user"), None)


def _runtime_session_id(history: list) -> str | None:
    # The Runtime line sits in the first user message; look at the first two non-system messages in case a
    # client puts something (e.g. a compaction summary) before it.
    opening = [m for m in history if _role(m) != "system"][:2]
    for msg in opening:
        if _role(msg) == "user":
            session_id = (runtime_fields(message_text(msg)) or {}).get("sessionId")
            if session_id:
                return session_id
    return None


def _prefix_session_id(history: list) -> str:
    # The system prompt alone is shared by every session of a client; with the first user message it is stable
    # within one conversation (history is append-only) and differs between conversations.
    opening = [_system_text(history), message_text(_first_user(history))]
    digest = hashlib.sha1(json.dumps(opening, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
    return f"prefix:{digest[:16]}"


def _resolve_session(headers: dict[str, str], body: dict, history: list) -> tuple[str, str]:
    explicit = _explicit_value(headers, "x-session-id", body, "session_id")
    if explicit is not None:
        return explicit
    return _infer_session(history)


# the id of a session inferred from OpenClaw's Runtime line (the plugin sends the same id in X-Session-Id)
RUNTIME_SESSION_PREFIX = "openclaw:"


def _infer_session(history: list) -> tuple[str, str]:
    session_id = _runtime_session_id(history)
    if session_id is not None:
        return RUNTIME_SESSION_PREFIX + session_id, "runtime"
    return _prefix_session_id(history), "prefix"


def _has_tools(body: dict) -> bool:
    return any(isinstance(body.get(key), list) and body.get(key) for key in ("tools", "functions"))


def _is_openclaw_compaction(system: str, history: list, has_tools: bool) -> bool:
    if has_tools:
        return False
    if system.lstrip().lower().startswith(_COMPACTION_SYSTEM_PREFIX):
        return True
    for msg in history:
        if _role(msg) == "user":
            text = message_text(msg)
            if "<conversation>" in text and "</conversation>" in text and _SUMMARY_WORD.search(text):
                return True
    return False


def _is_openclaw_heartbeat(history: list) -> bool:
    # Decided by the message this turn answers, not by the session: heartbeats wake the main session
    # agent:main:main, but by default every direct message the user sends lands there too, and those are
    # main-line turns we want to train on.
    text = strip_timestamp_prefix(message_text(_last_user(history))).lower()
    return text.startswith(_HEARTBEAT_PROMPT_PREFIXES)


def _is_title_like(system: str, history: list, has_tools: bool) -> bool:
    if has_tools:
        return False
    for text in (system, message_text(_last_user(history))):
        if _TITLE_REQUEST.search(text) and _CONVERSATION_WORD.search(text):
            return True
        if _SUMMARIZE_CONVERSATION.search(text):
            return True
    return False


def _is_openclaw_main(system: str, messages: list, has_tools: bool) -> bool:
    if messages and is_internal_context(messages[-1]):
        return True
    return has_tools and any(marker in system for marker in _OPENCLAW_MAIN_SYSTEM_MARKERS)


def _infer_turn_type(body: dict, messages: list, history: list) -> tuple[str, str]:
    system = _system_text(history)
    has_tools = _has_tools(body)
    if _is_openclaw_compaction(system, history, has_tools):
        return "side", "openclaw-compaction"
    if _is_openclaw_heartbeat(history):
        return "side", "openclaw-heartbeat"
    if _is_title_like(system, history, has_tools):
        return "side", "title-like"
    if _is_openclaw_main(system, messages, has_tools):
        return "main", "openclaw-main"
    # Unknown shape: train on it rather than drop it silently; the proxy logs it once per session.
    return "main", "unclassified"


def _resolve_turn_type(headers: dict[str, str], body: dict, messages: list, history: list) -> tuple[str, str, bool]:
    explicit = _explicit_value(headers, "x-turn-type", body, "turn_type")
    if explicit is not None:
        value, source = explicit
        return ("main" if value.lower() == "main" else "side"), source, True
    turn_type, reason = _infer_turn_type(body, messages, history)
    return turn_type, reason, False


def _header(headers: dict[str, str], name: str, limit: int = 200) -> str | None:
    value = (headers.get(name) or "").strip()
    return value[:limit] if value else None


def resolve_meta(headers: Mapping[str, str], body: dict) -> RequestMeta:
    """Session, main/side and end-of-session for one request: header wins, then body key, then inference.

    When the client tagged the request, inference runs too and is kept in `meta.inferred`, so the proxy can
    check one against the other on real traffic."""
    lowered = _lower_keys(headers)
    body = body if isinstance(body, dict) else {}
    messages = _as_message_list(body.get("messages"))
    history = strip_internal_context(messages)
    session_id, session_source = _resolve_session(lowered, body, history)
    turn_type, turn_reason, explicit_turn_type = _resolve_turn_type(lowered, body, messages, history)
    explicit_session = session_source in ("header", "body")
    inferred = None
    if explicit_turn_type or explicit_session:
        # what inference alone would have said: re-run only the halves the client's tags replaced
        inferred_session, inferred_source = _infer_session(history) if explicit_session else (session_id, session_source)
        inferred_type, inferred_reason = _infer_turn_type(body, messages, history) if explicit_turn_type \
            else (turn_type, turn_reason)
        inferred = InferredMeta(inferred_session, inferred_source, inferred_type, inferred_reason)
    turn_id = _header(lowered, "x-turn-id")
    meta = RequestMeta(
        session_id=session_id,
        session_source=session_source,
        turn_type=turn_type,
        turn_reason=turn_reason,
        explicit_turn_type=explicit_turn_type,
        session_done=_session_done(lowered, body),
        trace_id=turn_id or _trace_id(lowered),
        turn_id=turn_id,
        client_reason=_header(lowered, "x-turn-reason", 64),
        inferred=inferred,
    )
    if log.isEnabledFor(logging.DEBUG):
        log.debug("classified request: session %s from %s; %s turn: %s (%d message(s)%s%s%s%s)", meta.session_id,
                  SESSION_SOURCE_WORDS.get(meta.session_source, meta.session_source), meta.turn_type,
                  TURN_REASON_WORDS.get(meta.turn_reason, meta.turn_reason), len(messages),
                  ", session done" if meta.session_done else "",
                  f", trace {meta.trace_id}" if meta.trace_id else "",
                  f", client reason {meta.client_reason}" if meta.client_reason else "",
                  f"; inference says session {inferred.session_id}, {inferred.turn_type} ({inferred.turn_reason})"
                  if inferred is not None else "")
    return meta
