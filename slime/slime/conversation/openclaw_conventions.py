"""What the stock OpenClaw client writes into the messages it sends, and how we read it back.

OpenClaw talks to a custom provider through plain `POST /v1/chat/completions` and sends no session or
turn header (see the captured requests in tests/fixtures/openclaw_capture). Everything it adds lives in
the messages themselves:

* **Internal context.** Every request ends with one user message whose content is a list holding one text
  part that starts with `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` and ends with
  `<<<END_OPENCLAW_INTERNAL_CONTEXT>>>` (active exec sessions, subagents, system events). It is client
  scratch state, not something the user said; the next request drops it from the replayed history and
  appends a fresh one.
* **Timestamp envelope.** Text the user typed starts with a bracketed envelope that ends in a date and time:
  `[Sat 2026-11-21 23:35 UTC] hi` for a direct agent prompt (captured); messages from a channel name the
  channel and sender first (`[Signal Alice +1555 2026-01-18 00:19 PST] hi`, with seconds, an elapsed time
  such as `+2m`, or an ISO time `2026-01-18T05:19Z` depending on the client's settings). Heartbeat prompts
  have no envelope.
* **Runtime line.** The first user message of a session ends with one line
  `Runtime: agent=main | session=agent:main:explicit:sessa | sessionId=sessA | host=vm | ...`, written once
  and replayed verbatim in every later request of that session. After compaction the same line is the
  second text part of that message (parts with a `text` key and no `type`).
* **Content.** Ordinary user text is a plain string; only the internal context and the compaction summary
  come as lists of parts.

Session resolution (`slime.conversation.sessions`), the judges and the teacher prompt read OpenClaw's
messages through this module; nothing else defines these patterns.
"""

from __future__ import annotations

import re
from typing import Any

from slime.engine.chat_parsing import TEXT_PART_SEPARATOR

__all__ = [
    "INTERNAL_CONTEXT_END_MARKER",
    "INTERNAL_CONTEXT_MARKER",
    "RUNTIME_LINE",
    "TIMESTAMP_PREFIX",
    "clean_user_text",
    "content_text",
    "is_internal_context",
    "message_text",
    "runtime_fields",
    "strip_runtime_line",
    "strip_timestamp_prefix",
]

INTERNAL_CONTEXT_MARKER = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"
INTERNAL_CONTEXT_END_MARKER = "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"

# A bracketed envelope at the start of the text whose last part is a date and a time (optionally seconds, a
# time zone or offset). It must hold a date-time: "[draft] my essay" is the user's own text and stays.
# Apply it to left-stripped text (`strip_timestamp_prefix` does).
TIMESTAMP_PREFIX = re.compile(
    r"^\[[^\[\]\n]{0,80}?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?[^\[\]\n]{0,40}\]\s*")

# The whole Runtime line; its fields are `key=value` pairs separated by " | " (`runtime_fields`).
RUNTIME_LINE = re.compile(r"^Runtime: agent=[^\n]*", re.MULTILINE)
_RUNTIME_FIELD_SEPARATOR = " | "


def content_text(content: Any, separator: str = TEXT_PART_SEPARATOR) -> str:
    """Message content as text: a string as is, the text parts of a part list joined by `separator`.

    The default separator is the one the engine uses when it renders list content into the prompt, so the
    text is what the model saw. A lone part dict counts as a list of one; parts with a `text` key and no
    `type` (OpenClaw's compaction summary) are text; images and other parts are dropped; null, missing or
    oddly-typed content is "".
    """
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return separator.join(texts)


def message_text(message: Any, separator: str = TEXT_PART_SEPARATOR) -> str:
    """The text of an OpenAI chat message (`content_text` of its content); "" for anything not a dict."""
    if not isinstance(message, dict):
        return ""
    return content_text(message.get("content"), separator)


def is_internal_context(message: Any) -> bool:
    """Whether `message` is OpenClaw's internal-context message: a user message (a message without a role
    counts as one) whose text starts with the marker. The marker inside other messages is content."""
    if not isinstance(message, dict):
        return False
    role = message.get("role")
    if role is not None and (not isinstance(role, str) or role.strip().lower() != "user"):
        return False
    return message_text(message).lstrip().startswith(INTERNAL_CONTEXT_MARKER)


def strip_timestamp_prefix(text: str) -> str:
    """`text` without leading white space and without OpenClaw's timestamp envelope, if it has one."""
    return TIMESTAMP_PREFIX.sub("", text.lstrip(), count=1)


def strip_runtime_line(text: str) -> str:
    """`text` without OpenClaw's Runtime line(s)."""
    return RUNTIME_LINE.sub("", text)


def clean_user_text(text: str) -> str:
    """What the user wrote: `text` without the timestamp envelope and the Runtime line, stripped."""
    return strip_runtime_line(strip_timestamp_prefix(text)).strip()


def runtime_fields(text: str) -> dict[str, str] | None:
    """The `key=value` fields of the first Runtime line in `text` ({"agent": "main", "session": ...,
    "sessionId": ..., "host": ..., ...}), or None when there is no Runtime line."""
    match = RUNTIME_LINE.search(text)
    if match is None:
        return None
    fields: dict[str, str] = {}
    for item in match.group(0)[len("Runtime: "):].split(_RUNTIME_FIELD_SEPARATOR):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if sep and key and key not in fields:
            fields[key] = value
    return fields
