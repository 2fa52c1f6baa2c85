"""Traces from apps that call their own model: what `POST /v1/traces` accepts, and how a trace becomes ids.

A trace is one model call an app made elsewhere: the conversation it sent (`messages`, or a bare `prompt`), the
reply it got (`response`), and optionally what followed (`next_messages`: the user's next message or a tool
result, judged exactly like the next state of a proxied turn), an explicit `reward` in [-1, 1] (it wins over any
judge), a `note`, and the trace loop's `task`, `model` and `profile`. `trace_id` is the idempotency key: a trace
sent twice is stored once. A batch is `{"traces": [...]}`.

Traces are stored as main-line turns of their session (`session_id`, or one session per trace), so a later trace
of the same session whose messages continue an earlier one becomes that one's next state, as proxied turns do.
Their token ids are rendered with the policy's tokenizer and chat template, and they carry no log-probs: the
model that wrote them is not ours, so their samples are off-policy (`samples.sample_from_turn`).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field

from slime.engine.chat_parsing import ChatInputError, normalize_messages
from slime.engine.protocol import APIError
from slime.models.chat_template import render_text

MAX_BATCH = 1000
MAX_ID_CHARS = 256
MAX_NOTE_CHARS = 20000
MAX_PROFILE_BYTES = 16384
FIELDS = {"trace_id", "session_id", "messages", "prompt", "response", "next_messages", "tools", "reward", "note",
          "task", "model", "profile"}
POLARITIES = {"positive": 1, "good": 1, "up": 1, "+1": 1, "1": 1, "negative": -1, "bad": -1, "down": -1, "-1": -1,
              "neutral": 0, "0": 0}


@dataclass
class Trace:
    trace_id: str
    session_id: str
    messages: list[dict]  # the conversation the app sent, as the client wrote it (stored)
    response: dict  # the assistant message it got back
    next_messages: list[dict] = field(default_factory=list)
    tools: list[dict] | None = None
    reward: float | None = None
    note: str | None = None
    task: str | None = None
    model: str | None = None
    profile: dict | str | None = None

    @property
    def request(self) -> dict:
        """What is stored as the turn's request, like a proxied request."""
        out = {"messages": self.messages}
        if self.tools:
            out["tools"] = self.tools
        if self.model:
            out["model"] = self.model
        return out

    def meta(self) -> dict:
        return {"task": self.task, "model": self.model, "profile": self.profile, "note": self.note,
                "reward": self.reward}


def _bad(message: str, param: str) -> APIError:
    return APIError(400, f"{param}: {message}", param=param)


def _optional_str(raw: dict, key: str, where: str, limit: int = MAX_ID_CHARS) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(f"expected a string, got {type(value).__name__}", f"{where}.{key}")
    if not value.strip():
        raise _bad("must not be empty", f"{where}.{key}")
    if len(value) > limit:
        raise _bad(f"{len(value)} characters; at most {limit}", f"{where}.{key}")
    return value


def _messages(value, param: str) -> list[dict]:
    try:
        normalize_messages(value)  # the same checks the engine applies before rendering
    except ChatInputError as exc:
        sub = exc.param.replace("messages", param, 1) if exc.param else param
        raise APIError(400, str(exc).replace("messages", param, 1), param=sub) from None
    return value


def parse_trace(raw, where: str = "trace") -> Trace:
    """One trace object -> Trace, or an APIError(400) naming the field."""
    if not isinstance(raw, dict):
        raise _bad(f"expected an object, got {type(raw).__name__}", where)
    unknown = sorted(set(raw) - FIELDS)
    if unknown:
        raise _bad(f"unknown field(s) {unknown}; a trace has {sorted(FIELDS)}", where)
    trace_id = _optional_str(raw, "trace_id", where) or uuid.uuid4().hex
    session_id = _optional_str(raw, "session_id", where) or f"trace:{trace_id}"
    if raw.get("messages") is not None and raw.get("prompt") is not None:
        raise _bad("give messages or prompt, not both", f"{where}.prompt")
    if raw.get("messages") is not None:
        messages = list(_messages(raw["messages"], f"{where}.messages"))
    elif raw.get("prompt") is not None:
        prompt = raw["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise _bad("expected a non-empty string", f"{where}.prompt")
        messages = [{"role": "user", "content": prompt}]
    else:
        raise _bad("a trace needs messages (or prompt): what the app sent to its model", f"{where}.messages")
    response = raw.get("response")
    if response is None and messages and messages[-1].get("role") == "assistant":
        *messages, response = messages  # a conversation that ends with the reply
    if isinstance(response, str):
        response = {"role": "assistant", "content": response}
    if not isinstance(response, dict):
        raise _bad("expected the reply as a string or an assistant message", f"{where}.response")
    if response.get("role", "assistant") != "assistant":
        raise _bad(f"the reply's role must be 'assistant', got {response.get('role')!r}", f"{where}.response.role")
    response = {**response, "role": "assistant"}
    _messages([response], f"{where}.response")
    if not (response.get("content") or response.get("tool_calls")):
        raise _bad("the reply is empty (no content and no tool calls): nothing to train", f"{where}.response")
    if not messages:
        raise _bad("the conversation before the reply is empty", f"{where}.messages")
    next_messages = raw.get("next_messages")
    if next_messages is not None:
        next_messages = list(_messages(next_messages, f"{where}.next_messages"))
    tools = raw.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str)
            for t in tools)):
        raise _bad("expected a list of {'type': 'function', 'function': {'name': ...}}", f"{where}.tools")
    reward = raw.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise _bad(f"expected a number in [-1, 1], got {reward!r}", f"{where}.reward")
        if not -1.0 <= reward <= 1.0:
            raise _bad(f"{reward} is outside [-1, 1]", f"{where}.reward")
        reward = float(reward)
    note = _optional_str(raw, "note", where, MAX_NOTE_CHARS)
    profile = raw.get("profile")
    if profile is not None:
        if not isinstance(profile, (dict, str)):
            raise _bad("expected an object or a string", f"{where}.profile")
        if len(json.dumps(profile, ensure_ascii=False).encode()) > MAX_PROFILE_BYTES:
            raise _bad(f"larger than {MAX_PROFILE_BYTES} bytes", f"{where}.profile")
    return Trace(trace_id=trace_id, session_id=session_id, messages=messages, response=response,
                 next_messages=next_messages or [], tools=tools or None, reward=reward, note=note,
                 task=_optional_str(raw, "task", where), model=_optional_str(raw, "model", where), profile=profile)


def parse_traces(body) -> tuple[list[Trace], bool]:
    """(traces, is_batch) from a request body: one trace, or {"traces": [...]}."""
    if isinstance(body, dict) and "traces" in body:
        if set(body) - {"traces"}:
            raise _bad(f"a batch holds only 'traces', got {sorted(body)}", "body")
        items = body["traces"]
        if not isinstance(items, list) or not items:
            raise _bad("expected a non-empty list of traces", "traces")
        if len(items) > MAX_BATCH:
            raise APIError(413, f"traces: {len(items)} traces in one batch; at most {MAX_BATCH}", param="traces")
        traces = [parse_trace(item, f"traces[{i}]") for i, item in enumerate(items)]
        seen: dict[str, int] = {}
        for i, trace in enumerate(traces):
            if trace.trace_id in seen:
                raise _bad(f"trace_id {trace.trace_id!r} repeats traces[{seen[trace.trace_id]}]", f"traces[{i}].trace_id")
            seen[trace.trace_id] = i
        return traces, True
    return [parse_trace(body)], False


def parse_polarity(value) -> int | None:
    """The operator's polarity: positive / negative / neutral (or 1 / -1 / 0); None when not given."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad("expected 'positive', 'negative', 'neutral' or 1/-1/0", "polarity")
    if isinstance(value, (int, float)) and value in (1, 0, -1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in POLARITIES:
        return POLARITIES[value.strip().lower()]
    raise _bad(f"expected 'positive', 'negative', 'neutral' or 1/-1/0, got {value!r}", "polarity")


def trace_token_ids(tokenizer, trace: Trace) -> tuple[list[int], list[int]]:
    """(prompt ids, response ids) as our engine would have rendered the conversation and sampled the reply.

    The reply's ids are the template's rendering of the whole conversation minus the prompt's, cut after the
    end-of-turn token (what the engine stops on): training then teaches the model to stop there too."""
    messages = normalize_messages(trace.messages)
    response = normalize_messages([trace.response])[0]
    prompt_text = render_text(tokenizer, messages, trace.tools)
    full_text = render_text(tokenizer, messages + [response], trace.tools, add_generation_prompt=False)
    prompt_ids = tokenizer.encode(prompt_text, add_special_tokens=False)
    eos = tokenizer.eos_token
    if full_text.startswith(prompt_text):
        reply = full_text[len(prompt_text):]
        if eos and eos in reply:
            reply = reply[: reply.rindex(eos) + len(eos)]
        response_ids = tokenizer.encode(reply, add_special_tokens=False)
    else:  # a template that rewrites earlier turns (e.g. drops reasoning): the reply's text and an end token
        response_ids = tokenizer.encode(response.get("content") or "", add_special_tokens=False)
        if tokenizer.eos_token_id is not None:
            response_ids.append(tokenizer.eos_token_id)
    return prompt_ids, response_ids


def tokenize_all(tokenizer, traces: list[Trace], context: int | None, is_batch: bool) -> list[tuple]:
    """[(trace, prompt ids, response ids)], or an APIError(400) naming the first trace that cannot be rendered
    or does not fit the model's context (nothing of the batch is stored then)."""
    out = []
    for i, trace in enumerate(traces):
        where = f"traces[{i}]" if is_batch else "trace"
        try:
            prompt_ids, response_ids = trace_token_ids(tokenizer, trace)
        except (ValueError, ChatInputError) as exc:
            raise APIError(400, f"{where}: {exc}", param=where) from None
        if context and len(prompt_ids) + len(response_ids) > context:
            raise APIError(400, f"{where}: {len(prompt_ids)} prompt + {len(response_ids)} response tokens exceed "
                                f"the model's context of {context} tokens", param=where)
        out.append((trace, prompt_ids, response_ids))
    return out
