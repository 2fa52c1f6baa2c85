"""Pure helpers shared by every judge: reading `\\boxed{}` scores, majority voting, and flattening
OpenAI chat messages (including OpenClaw's wrappers) into the plain text a judge reads."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence

__all__ = [
    "INTERNAL_CONTEXT_MARKER",
    "clean_user_text",
    "is_internal_context",
    "majority_vote",
    "message_text",
    "parse_boxed_score",
    "render_message_for_judge",
    "truncate_middle",
]

# One optional sign and exactly one digit, as the upstream PRM parser reads it (spec 5.3).
BOXED_SCORE = re.compile(r"\\boxed\{([-+]?\d)\}")

# OpenClaw appends a fresh user message starting with this marker to every request (scratch state, not
# something the user said), so judges must never mistake it for the user's request or feedback.
INTERNAL_CONTEXT_MARKER = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"

# OpenClaw prefixes user text with "[Sat 2026-11-21 23:35 UTC] " and adds a "Runtime: agent=..." line to a
# session's first message; both are client metadata that would only confuse phrase matching.
_TIMESTAMP_PREFIX = re.compile(r"^\s*\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?(?: [^\]\n]{1,40})?\]\s*")
_RUNTIME_LINE = re.compile(r"(?:^|\n)Runtime: agent=[^\n]*(?=\n|$)")


def parse_boxed_score(text: str | None, allowed: Iterable[int] = (1, -1, 0)) -> int | None:
    """The value of the LAST `\\boxed{d}` in `text`, or None when there is none or it is not allowed.

    The last one counts because judge models often quote the options ("\\boxed{1} or \\boxed{-1}")
    while reasoning before giving their answer.
    """
    if not text:
        return None
    matches = BOXED_SCORE.findall(text)
    if not matches:
        return None
    value = int(matches[-1])
    return value if value in set(allowed) else None


def majority_vote(scores: Sequence[int | None]) -> float:
    """The most common valid score; 0.0 when no vote is valid or the top count is shared (a tie)."""
    counts = Counter(score for score in scores if score is not None)
    if not counts:
        return 0.0
    ranked = counts.most_common()
    top_value, top_count = ranked[0]
    if len(ranked) > 1 and ranked[1][1] == top_count:
        return 0.0  # a split jury is no evidence either way
    return float(top_value)


def message_text(message: dict | None) -> str:
    """The text of an OpenAI message: string content as is, text parts joined by a space, images dropped."""
    if not message:
        return ""
    return content_text(message.get("content"))


def content_text(content, separator: str = " ") -> str:
    """Message content as text: strings as is, text parts joined by `separator`, null as "", images dropped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):  # a lone part instead of a list of parts
        content = [content]
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str) and part.get("type", "text") == "text":
                # OpenClaw's compaction summary sends parts with a "text" key and no "type"
                texts.append(part["text"])
        return separator.join(texts)
    return str(content)


def render_message_for_judge(message: dict | None) -> str:
    """Message text plus its tool calls as `[tool call] name(arguments)` lines, for a judge to read."""
    if not message:
        return ""
    lines = [message_text(message)] if message_text(message) else []
    for call in message.get("tool_calls") or []:
        function = (call or {}).get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        lines.append(f"[tool call] {function.get('name', '?')}({arguments})")
    return "\n".join(lines)


def is_internal_context(message: dict | None) -> bool:
    """Whether this is OpenClaw's injected internal-context message rather than anything the user wrote."""
    return bool(message) and message_text(message).lstrip().startswith(INTERNAL_CONTEXT_MARKER)


def clean_user_text(text: str) -> str:
    """User text without OpenClaw's timestamp prefix and session Runtime line."""
    text = _TIMESTAMP_PREFIX.sub("", text, count=1)
    return _RUNTIME_LINE.sub("", text).strip()


def truncate_middle(text: str, limit: int | None) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail (a request's ask is usually at
    one end, an error's cause at the other) with a marker saying how much was left out."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text
    omitted = len(text) - limit
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:]}"
