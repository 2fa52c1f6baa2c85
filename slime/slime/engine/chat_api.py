"""OpenAI `/v1/chat/completions` on top of the scheduler: prompt building, responses, SSE chunks."""

from __future__ import annotations

import time
import uuid
from typing import AsyncIterator

from slime.engine.chat_parsing import (
    ChatInputError,
    StreamingToolCallParser,
    THINK_CLOSE,
    THINK_OPEN,
    normalize_messages,
    normalize_messages_with_images,
    parse_tool_calls,
    split_reasoning,
)
from slime.engine.engine import Engine, raise_if_failed
from slime.engine.protocol import APIError, ChatCompletionRequest
from slime.engine.scheduler import Sequence


def build_sequences(engine: Engine, req: ChatCompletionRequest) -> list[Sequence]:
    image_urls: list[tuple[str, str]] = []
    try:
        if engine.vision is None:
            messages = normalize_messages(req.messages)  # image parts are refused there (text only)
        else:
            messages, image_urls = normalize_messages_with_images(req.messages)
    except ChatInputError as exc:
        raise APIError(400, str(exc), param=exc.param) from None
    prompt_ids = engine.render_chat(messages, req.tools if req.use_tools else None, req.chat_template_kwargs)
    images = image_key = None
    if image_urls:
        images = engine.vision.preprocess([url for url, _ in image_urls], "messages",
                                          wheres=[where for _, where in image_urls])
        images_param = image_urls[0][1] if len(image_urls) == 1 else "messages"
        prompt_ids = engine.vision.expand(prompt_ids, images, images_param)
        image_key = engine.vision.prefix_key(prompt_ids, images)
    engine.check_prompt(prompt_ids, param="messages")
    room = engine.room_for(len(prompt_ids))
    requested = req.requested_max_tokens()
    # Clients such as OpenClaw always ask for a fixed budget (4096) whatever the model's context is;
    # rejecting would break them, so the budget is clamped to what fits.
    max_new = room if requested is None else min(requested, room)
    sequences = []
    for i in range(req.n):
        config = req.to_config(max_new)
        if config.seed is not None:
            config.seed += i
        sequences.append(
            Sequence(
                prompt_ids=prompt_ids,
                sampling=config,
                return_logprob=req.logprobs,
                top_logprobs_num=req.top_logprobs or 0,
                images=images,
                image_key=image_key,
            )
        )
    return sequences


def _logprob_content(engine: Engine, seq: Sequence, start: int, end: int) -> list[dict]:
    out = []
    for pos in range(start, end):
        token_id = seq.output_ids[pos]
        text = engine.token_text(token_id)
        entry = {"token": text, "logprob": seq.output_logprobs[pos], "bytes": list(text.encode("utf-8"))}
        top = seq.output_top[pos] if pos < len(seq.output_top) else []
        entry["top_logprobs"] = [
            {"token": engine.token_text(t), "logprob": lp, "bytes": list(engine.token_text(t).encode("utf-8"))}
            for lp, t in top
        ]
        out.append(entry)
    return out


def _finish_reason(seq: Sequence, has_tool_calls: bool) -> str:
    kind = seq.finish_reason["type"]
    if kind == "stop" and has_tool_calls:
        return "tool_calls"
    return kind


class ChatResponder:
    """Formats one chat completion request's output, whole or as a stream of chunks."""

    def __init__(self, engine: Engine, req: ChatCompletionRequest, sequences: list[Sequence]):
        self.engine, self.req, self.sequences = engine, req, sequences
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.split_reasoning = engine.config.reasoning_parser is not None and req.separate_reasoning

    def _usage(self) -> dict:
        prompt = len(self.sequences[0].prompt_ids)
        completion = sum(len(s.output_ids) for s in self.sequences)
        cached = self.sequences[0].cached_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _envelope(self, obj: str) -> dict:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.engine.served_model_name,
            # null in a stream's first chunk, sent before the request is admitted to a batch: the version
            # is only known once the engine starts it
            "weight_version": self.sequences[0].weight_version or None,
        }

    # --- whole response ---------------------------------------------------------------------
    def response(self) -> dict:
        choices = []
        for index, seq in enumerate(self.sequences):
            reasoning, text = split_reasoning(seq.text) if self.split_reasoning else (None, seq.text)
            tool_calls = []
            if self.req.use_tools:
                text, tool_calls = parse_tool_calls(text)
            message = {"role": "assistant", "content": text if (text or not tool_calls) else None}
            if reasoning is not None:
                message["reasoning_content"] = reasoning
            if tool_calls:
                message["tool_calls"] = tool_calls
            choice = {
                "index": index,
                "message": message,
                "logprobs": {"content": _logprob_content(self.engine, seq, 0, len(seq.output_ids))}
                if self.req.logprobs
                else None,
                "finish_reason": _finish_reason(seq, bool(tool_calls)),
            }
            if self.req.return_token_ids:
                choice["token_ids"] = list(seq.output_ids)
            choices.append(choice)
        body = {**self._envelope("chat.completion"), "choices": choices, "usage": self._usage()}
        if self.req.return_token_ids:
            body["prompt_token_ids"] = list(self.sequences[0].prompt_ids)
            if self.sequences[0].images is not None:
                body["image_grid_thw"] = self.sequences[0].images.grid_list
        return body

    # --- streaming ------------------------------------------------------------------------
    async def chunks(self, updates: AsyncIterator[tuple[int, bool]]) -> AsyncIterator[dict]:
        states = [_StreamState(self.req.use_tools, self.split_reasoning) for _ in self.sequences]
        first = {**self._envelope("chat.completion.chunk"), "choices": []}
        for index in range(len(self.sequences)):
            first["choices"].append({"index": index, "delta": {"role": "assistant", "content": ""},
                                     "logprobs": None, "finish_reason": None})
        if self.req.return_token_ids:
            first["prompt_token_ids"] = list(self.sequences[0].prompt_ids)
            if self.sequences[0].images is not None:
                first["image_grid_thw"] = self.sequences[0].images.grid_list
        yield first
        async for index, finished in updates:
            seq, state = self.sequences[index], states[index]
            chunk = self._progress_chunk(index, seq, state, finished)
            if chunk is not None:
                yield chunk
        if self.req.stream_options is not None and self.req.stream_options.include_usage:
            yield {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self._usage()}

    def _progress_chunk(self, index: int, seq: Sequence, state: "_StreamState", finished: bool) -> dict | None:
        if finished:
            raise_if_failed([seq])
        text_end = len(seq.text) if finished else seq.stable_text_len
        new_text = seq.text[state.sent_chars:text_end]
        state.sent_chars = max(state.sent_chars, text_end)
        delta = state.feed(new_text, finished)
        n_tokens = len(seq.output_ids)
        new_tokens = seq.output_ids[state.sent_tokens:n_tokens]
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}
        if self.req.logprobs:
            choice["logprobs"] = {"content": _logprob_content(self.engine, seq, state.sent_tokens, n_tokens)}
        if self.req.return_token_ids:
            choice["token_ids"] = new_tokens
        state.sent_tokens = n_tokens
        if finished:
            choice["finish_reason"] = _finish_reason(seq, state.tool_calls > 0)
        elif not delta and not (new_tokens and (self.req.logprobs or self.req.return_token_ids)):
            return None  # e.g. tokens inside a <tool_call> block: nothing to tell the client yet
        return {**self._envelope("chat.completion.chunk"), "choices": [choice]}


class _StreamState:
    """Per-choice streaming state: how much was sent, and the incremental reasoning/tool-call parsers."""

    def __init__(self, use_tools: bool, split_reasoning: bool):
        self.sent_chars = 0
        self.sent_tokens = 0
        self.tool_calls = 0
        self.tools = StreamingToolCallParser() if use_tools else None
        # reasoning mode: "undecided" until we know whether the text opens with <think>
        self.reasoning_mode = "undecided" if split_reasoning else "off"
        self.pending = ""

    def feed(self, text: str, finished: bool) -> dict:
        delta: dict = {}
        content = self._split_reasoning(text, finished, delta)
        events = []
        if self.tools is not None:
            events = self.tools.feed(content) if content else []
            if finished:
                events += self.tools.finish()
        elif content:
            events = [("content", content)]
        pieces = [e[1] for e in events if e[0] == "content"]
        if pieces and "".join(pieces):
            delta["content"] = "".join(pieces)
        calls = []
        for event in events:
            if event[0] == "tool_call":
                _, call_index, call = event
                calls.append({"index": call_index, **call})
                self.tool_calls += 1
        if calls:
            delta["tool_calls"] = calls
        return delta

    def _split_reasoning(self, text: str, finished: bool, delta: dict) -> str:
        if self.reasoning_mode == "off":
            return text
        self.pending += text
        if self.reasoning_mode == "undecided":
            stripped = self.pending.lstrip()
            if stripped.startswith(THINK_OPEN):
                self.reasoning_mode = "thinking"
                self.pending = stripped[len(THINK_OPEN):]
            elif THINK_OPEN.startswith(stripped) and not finished:
                return ""  # could still become "<think>"
            else:
                self.reasoning_mode = "off"
                out, self.pending = self.pending, ""
                return out
        if self.reasoning_mode == "thinking":
            if THINK_CLOSE in self.pending:
                reasoning, rest = self.pending.split(THINK_CLOSE, 1)
                if reasoning:
                    delta["reasoning_content"] = reasoning
                self.reasoning_mode = "off"
                self.pending = ""
                return rest.lstrip()
            # hold back what could be the start of </think>
            hold = next((k for k in range(len(THINK_CLOSE) - 1, 0, -1)
                         if self.pending.endswith(THINK_CLOSE[:k])), 0)
            if finished:
                hold = 0
            emit = self.pending[: len(self.pending) - hold]
            self.pending = self.pending[len(emit):]
            if emit:
                delta["reasoning_content"] = emit
            return ""
        return ""
