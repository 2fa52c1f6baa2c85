"""Chat-protocol plumbing for the inference server: request messages in, model text out.

- `normalize_messages` turns OpenAI chat messages into the plain dicts a Jinja chat template expects.
- `parse_tool_calls` / `StreamingToolCallParser` extract `<tool_call>{json}</tool_call>` blocks
  (the Hermes/Qwen convention) from generated text, whole or as it streams.
- `split_reasoning` separates Qwen3-style `<think>...</think>` reasoning from the answer.

When a response has both, split the reasoning off first and parse tool calls from the content only.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool")

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# Separator between the text parts of one message. OpenAI leaves the joining unspecified; a newline
# keeps separately sent parts from running into each other ("foo" + "bar" -> "foobar").
TEXT_PART_SEPARATOR = "\n"


class ChatInputError(ValueError):
    """A request's messages cannot be turned into a prompt. `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


# --------------------------------------------------------------------------------------------------
# Request side
# --------------------------------------------------------------------------------------------------


def normalize_messages(messages: list[dict]) -> list[dict]:
    """Validate OpenAI chat messages and return new, template-ready copies.

    Text-part lists become one string (parts joined with TEXT_PART_SEPARATOR), `developer` becomes
    `system`, null content becomes "", and assistant tool-call arguments sent as JSON strings become
    dicts, since chat templates iterate over them. The input is not modified.
    """
    if not isinstance(messages, list) or not messages:
        raise ChatInputError("'messages' must be a non-empty list", "messages")
    return [_normalize_message(message, f"messages[{i}]") for i, message in enumerate(messages)]


def normalize_messages_with_images(messages: list[dict]) -> tuple[list[dict], list[tuple[str, str]]]:
    """`normalize_messages` for a vision-language model: also takes `image_url` content parts.

    A message with images keeps a list content, `[{"type": "text", "text": ...}, {"type": "image"}, ...]`
    (adjacent text parts joined as usual), which Qwen-VL chat templates render with one image placeholder
    per image part. Returns the messages and, in their order, each image's (url, where) with `where` naming
    its field for error messages. Messages without images come out as `normalize_messages` makes them."""
    if not isinstance(messages, list) or not messages:
        raise ChatInputError("'messages' must be a non-empty list", "messages")
    images: list[tuple[str, str]] = []
    return [_normalize_message(message, f"messages[{i}]", images) for i, message in enumerate(messages)], images


def _normalize_message(message: Any, where: str, images: list | None = None) -> dict:
    if not isinstance(message, dict):
        raise ChatInputError(f"{where} must be an object", where)
    role = message.get("role")
    if role not in ROLES:
        raise ChatInputError(f"{where}.role must be one of {', '.join(ROLES)}; got {role!r}", f"{where}.role")

    out = copy.deepcopy(message)
    if role == "developer":
        out["role"] = "system"

    content = message.get("content")
    if content is None and role in ("system", "developer", "user", "tool"):
        raise ChatInputError(f"{where}.content is required for role {role!r}", f"{where}.content")
    out["content"] = _content_to_text(content, f"{where}.content", images)

    if role == "assistant" and message.get("tool_calls") is not None:
        out["tool_calls"] = _normalize_tool_calls(out["tool_calls"], f"{where}.tool_calls")
    return out


def _content_to_text(content: Any, where: str, images: list | None = None) -> str | list[dict]:
    """The text of a content; with `images` (a vision model), image parts are collected there and a content
    that has any comes back as a list of text and image parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ChatInputError(f"{where} must be a string, null, or a list of content parts", where)
    texts = []
    parts: list[dict] = []  # with images: text runs and image parts in order
    for j, part in enumerate(content):
        part_where = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise ChatInputError(f"{part_where} must be an object", part_where)
        if images is not None and part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str):
                raise ChatInputError(f"{part_where}.image_url.url must be a string", f"{part_where}.image_url.url")
            if texts:
                parts.append({"type": "text", "text": TEXT_PART_SEPARATOR.join(texts)})
                texts = []
            parts.append({"type": "image"})
            images.append((url, f"{part_where}.image_url.url"))
            continue
        if part.get("type") != "text":
            raise ChatInputError(
                f"{part_where}: content part type {part.get('type')!r} is not supported (text only)", part_where
            )
        if not isinstance(part.get("text"), str):
            raise ChatInputError(f"{part_where}.text must be a string", f"{part_where}.text")
        texts.append(part["text"])
    if not parts:
        return TEXT_PART_SEPARATOR.join(texts)
    if texts:
        parts.append({"type": "text", "text": TEXT_PART_SEPARATOR.join(texts)})
    return parts


def _normalize_tool_calls(tool_calls: Any, where: str) -> list[dict]:
    if not isinstance(tool_calls, list):
        raise ChatInputError(f"{where} must be a list", where)
    for j, call in enumerate(tool_calls):
        call_where = f"{where}[{j}]"
        if not isinstance(call, dict):
            raise ChatInputError(f"{call_where} must be an object", call_where)
        function = call.get("function")
        if not isinstance(function, dict):
            raise ChatInputError(f"{call_where}.function must be an object", f"{call_where}.function")
        if not isinstance(function.get("name"), str):
            raise ChatInputError(f"{call_where}.function.name must be a string", f"{call_where}.function.name")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                function["arguments"] = parsed
    return tool_calls


# --------------------------------------------------------------------------------------------------
# Response side: tool calls
# --------------------------------------------------------------------------------------------------


def new_tool_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def _tool_call_from_block(body: str) -> dict | None:
    """The OpenAI tool call for one block body, or None if the body is not a valid call."""
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return None
    arguments = payload.get("arguments")
    if arguments is None:
        arguments = "{}"
    elif isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        return None
    function = {"name": payload["name"], "arguments": arguments}
    return {"id": new_tool_call_id(), "type": "function", "function": function}


def parse_tool_calls(text: str) -> tuple[str, list[dict]]:
    """Split generated text into (content, tool calls).

    Each complete, valid `<tool_call>...</tool_call>` block becomes an OpenAI tool call; invalid
    blocks and an unterminated trailing block stay in the content verbatim. The content is stripped.
    """
    content: list[str] = []
    calls: list[dict] = []
    pos = 0
    while True:
        start = text.find(TOOL_CALL_OPEN, pos)
        end = -1 if start == -1 else text.find(TOOL_CALL_CLOSE, start + len(TOOL_CALL_OPEN))
        if end == -1:
            content.append(text[pos:])
            break
        block_end = end + len(TOOL_CALL_CLOSE)
        content.append(text[pos:start])
        call = _tool_call_from_block(text[start + len(TOOL_CALL_OPEN) : end])
        if call is None:
            content.append(text[start:block_end])
        else:
            calls.append(call)
        pos = block_end
    return "".join(content).strip(), calls


class StreamingToolCallParser:
    """Incremental `parse_tool_calls` for streamed text.

    `feed(delta)` and `finish()` return events: `("content", text)` or `("tool_call", index, call)`.
    Content events, concatenated, are exactly the input minus the valid tool-call blocks; that is
    the unstripped form of `parse_tool_calls`' content, so the two agree after `.strip()`. Tool calls
    come out in the same order with the same names and arguments (ids are fresh).
    """

    def __init__(self):
        self._buffer = ""  # held-back text outside a block, or the body so far inside one
        self._in_block = False
        self._scanned = 0  # inside a block: how much of the body has been searched for the close tag
        self._next_index = 0

    def feed(self, delta: str) -> list[tuple]:
        self._buffer += delta
        events: list[tuple] = []
        while True:
            if not self._in_block:
                start = self._buffer.find(TOOL_CALL_OPEN)
                if start == -1:
                    # Release everything except a tail that could still grow into "<tool_call>".
                    keep = _partial_tag_suffix_len(self._buffer, TOOL_CALL_OPEN)
                    self._emit_content(events, self._buffer[: len(self._buffer) - keep])
                    self._buffer = self._buffer[len(self._buffer) - keep :]
                    return events
                self._emit_content(events, self._buffer[:start])
                self._buffer = self._buffer[start + len(TOOL_CALL_OPEN) :]
                self._in_block, self._scanned = True, 0
            else:
                # Resume the search where the last one stopped, minus room for a tag split across deltas.
                end = self._buffer.find(TOOL_CALL_CLOSE, max(0, self._scanned - len(TOOL_CALL_CLOSE) + 1))
                if end == -1:
                    self._scanned = len(self._buffer)
                    return events
                body = self._buffer[:end]
                self._buffer = self._buffer[end + len(TOOL_CALL_CLOSE) :]
                self._in_block = False
                call = _tool_call_from_block(body)
                if call is None:
                    self._emit_content(events, TOOL_CALL_OPEN + body + TOOL_CALL_CLOSE)
                else:
                    events.append(("tool_call", self._next_index, call))
                    self._next_index += 1

    def finish(self) -> list[tuple]:
        """Flush held-back text and an unterminated block as content."""
        rest = (TOOL_CALL_OPEN if self._in_block else "") + self._buffer
        self._buffer, self._in_block, self._scanned = "", False, 0
        events: list[tuple] = []
        self._emit_content(events, rest)
        return events

    @staticmethod
    def _emit_content(events: list[tuple], text: str) -> None:
        if text:
            events.append(("content", text))


def _partial_tag_suffix_len(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag`."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


# --------------------------------------------------------------------------------------------------
# Response side: reasoning
# --------------------------------------------------------------------------------------------------


def split_reasoning(text: str) -> tuple[str | None, str]:
    """Split Qwen3-style thinking output into (reasoning_content, content).

    Qwen3 chat templates put `<think>` in the prompt, so generations usually hold only the closing
    tag; a leading `<think>` is removed when present. A `<think>` that opens the text but is never
    closed (truncated generation) makes all of the rest reasoning. Without tags: (None, text).
    """
    close = text.find(THINK_CLOSE)
    if close != -1:
        reasoning = text[:close].strip()
        if reasoning.startswith(THINK_OPEN):
            reasoning = reasoning[len(THINK_OPEN) :].strip()
        return reasoning, text[close + len(THINK_CLOSE) :].lstrip()
    stripped = text.lstrip()
    # Only a leading <think> counts: a tag mentioned mid-answer must not swallow the answer.
    if stripped.startswith(THINK_OPEN):
        return stripped[len(THINK_OPEN) :].strip(), ""
    return None, text
