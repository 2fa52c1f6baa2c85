"""Pure helpers shared by every judge: reading `\\boxed{}` scores, majority voting, and rendering OpenAI chat
messages into the plain text a judge reads. OpenClaw's message conventions (internal context, timestamp
envelope, Runtime line, content parts) live in `slime.conversation.openclaw_conventions`."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from slime.conversation.openclaw_conventions import message_text

__all__ = [
    "majority_vote",
    "parse_boxed_score",
    "render_message_for_judge",
    "truncate_middle",
]

# One optional sign and exactly one digit, as the upstream PRM parser reads it.
BOXED_SCORE = re.compile(r"\\boxed\{([-+]?\d)\}")


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


def truncate_middle(text: str, limit: int | None) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail (a request's ask is usually at
    one end, an error's cause at the other) with a marker saying how much was left out."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text
    omitted = len(text) - limit
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[len(text) - tail:]}"
