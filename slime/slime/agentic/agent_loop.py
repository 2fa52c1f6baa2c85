"""The agent-loop primitives the agentic settings share: strict Qwen-style tool-call parsing (`parse_tool_calls`,
the observation a malformed call gets), message-level context fitting (`fit_messages`: whole turns dropped from the
middle, never a cut inside a special token), a model turn (`Turn`) and its training sample (`turn_sample`, one
sample per turn for `--dynamic-history`; `failed_sample` for an episode the environment failed), and the policies
that write turns (`EngineTurnPolicy`: an engine with exact ids and log-probs; `ScriptedTurnPolicy`: given turns).

The settings' own loops, prompts and rewards live in their method folders (`terminal-rl/generate.py`,
`gui-rl/generate_with_gui.py`, `swe-rl/generate_with_swe_remote.py`) and build on these.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from slime.agentic.tool_json import loads_tool_json
from slime.utils.types import Sample

PARSE_ERROR_NAME = "json_parse_error"
OMITTED_NOTE = "[{n} earlier messages were left out to fit the context]"

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


# ------------------------------------------------------------------------------------------------ parsing


@dataclass
class ToolCall:
    name: str
    arguments: dict


@dataclass
class ParsedTurn:
    content: str  # the text outside the tool-call blocks
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one reason per malformed block


def parse_tool_calls(text: str) -> ParsedTurn:
    """Every `<tool_call>` block of a model turn, strictly: each must hold one JSON object with a string `name` and
    an object `arguments` (a JSON string holding an object is accepted, as OpenAI sends them). An unterminated
    block at the end of the text (cut by the token limit) is a parse error too."""
    calls, errors = [], []
    for match in _TOOL_CALL_BLOCK.finditer(text):
        body = match.group(1).strip()
        if not match.group(0).endswith("</tool_call>"):
            errors.append("the <tool_call> block is not closed with </tool_call>")
            continue
        try:
            call = loads_tool_json(body)
        except ValueError as e:
            errors.append(f"the tool call is not valid JSON ({e})")
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            errors.append('the tool call must be a JSON object with a string "name"')
            continue
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = loads_tool_json(arguments)
            except ValueError as e:
                errors.append(f'the "arguments" string is not valid JSON ({e})')
                continue
        if not isinstance(arguments, dict):
            errors.append('"arguments" must be a JSON object')
            continue
        calls.append(ToolCall(call["name"], arguments))
    content = _TOOL_CALL_BLOCK.sub("", text).strip()
    return ParsedTurn(content, calls, errors)


def parse_error_observation(reason: str) -> str:
    return (f"JSON Parse Error: {reason}. The tool call format is incorrect. Call a tool with exactly: "
            '<tool_call>\n{"name": "<tool name>", "arguments": {...}}\n</tool_call>')


# ------------------------------------------------------------------------------------------------ context


def turn_groups(messages: list[dict], head: int) -> list[list[int]]:
    """Indices of the messages after the first `head`, grouped by turn (an assistant message and the tool
    messages that answer it), so a cut never separates a call from its result."""
    groups: list[list[int]] = []
    for i in range(head, len(messages)):
        if messages[i]["role"] == "assistant" or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def fit_messages(messages: list[dict], count_tokens: Callable[[list[dict]], int], max_tokens: int,
                 head: int = 2) -> tuple[list[dict], int] | None:
    """(messages that fit `max_tokens`, how many were left out), keeping the first `head` messages and as many
    of the latest whole turns as fit, with a note in place of the left-out middle; None if not even the head and
    the last turn fit."""
    if count_tokens(messages) <= max_tokens:
        return messages, 0
    groups = turn_groups(messages, head)
    for keep in range(len(groups) - 1, 0, -1):  # drop the oldest turns first
        kept = [i for group in groups[-keep:] for i in group]
        omitted = len(messages) - head - len(kept)
        candidate = messages[:head] + [{"role": "user", "content": OMITTED_NOTE.format(n=omitted)}] + \
            [messages[i] for i in kept]
        if count_tokens(candidate) <= max_tokens:
            return candidate, omitted
    return None


# ------------------------------------------------------------------------------------------------ policy


@dataclass
class Turn:
    input_ids: list[int]
    output_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str
    omitted_messages: int = 0
    latency_ms: float = 0.0
    images: list[str] | None = None  # the prompt's images (base64), in the order of its image pads
    weight_version: str | None = None  # the engine's weights that sampled it (the trainer's staleness metric)



def engine_weight_version(meta_info: dict) -> str | None:
    """The weights an engine reply came from (its `meta_info`); None when the engine does not say."""
    version = meta_info.get("weight_version")
    return None if version is None or str(version) == "" else str(version)


def turn_sample(sample: Sample, turn: Turn, k: int, meta: dict, status, trainable: bool,
                prm_scores: list[float | None] | None) -> Sample:
    """The training sample of one model turn (one sample per turn, `--dynamic-history`): the exact ids the engine
    got + the ids it sampled with their log-probs, loss mask 1; `meta` gets the turn's `step_wise` record (step k,
    its span, its PRM score); a turn with images carries them (`multimodal_inputs`, as the engine got them). Shared by
    the terminal, SWE and GUI agents."""
    meta = {**meta, "step_wise": {"step_indices": [k], "step_token_spans": [[0, len(turn.output_ids)]],
                                  "prm_scores": [prm_scores[k]] if prm_scores else None}}
    return Sample(group_index=sample.group_index, index=sample.index, prompt=sample.prompt, label=sample.label,
                  tokens=list(turn.input_ids) + list(turn.output_ids), response_length=len(turn.output_ids),
                  response=turn.text, loss_mask=[1] * len(turn.output_ids), rollout_log_probs=list(turn.logprobs),
                  status=status, metadata=meta, remove_sample=not trainable,
                  multimodal_inputs={"images": list(turn.images)} if turn.images else None,
                  weight_version=turn.weight_version,
                  weight_versions=[turn.weight_version] if turn.weight_version else [])


def failed_sample(sample: Sample, tokenizer, error: str, **metadata) -> list[Sample]:
    """An episode the environment failed: one FAILED sample that trains nothing (the batch goes on), with `error`
    and `metadata` (the setting's keys, e.g. its task key) recorded. Shared by the terminal, SWE and GUI agents."""
    eos = tokenizer.eos_token_id or 0
    sample.tokens, sample.response_length, sample.response = [eos, eos], 1, ""
    sample.loss_mask, sample.rollout_log_probs = [0], [0.0]
    sample.status, sample.remove_sample = Sample.Status.FAILED, True
    sample.metadata = {**(sample.metadata or {}), "status": "failed", "error": error[:500], "accuracy": 0.0,
                       **metadata}
    return [sample]


class TurnPolicy(Protocol):
    async def generate_turn(self, messages: list[dict], tools: list[dict]) -> Turn | None:
        """One model turn for these messages, or None when they cannot fit the context."""


class EngineTurnPolicy:
    """A policy served by an engine speaking our protocol (`/generate` with exact ids and log-probs). Messages with
    image parts need a vision-language model and :class:`slime.agentic.vision_policy.VisionTurnPolicy`, which
    widens each image's pad in the rendered ids; the images go to the engine as `image_data`."""

    def __init__(self, client, tokenizer, sampling_params: dict, max_context_tokens: int):
        self.client, self.tokenizer = client, tokenizer
        self.sampling_params = dict(sampling_params)
        self.max_new_tokens = int(self.sampling_params.get("max_new_tokens") or 1024)
        self.max_input_tokens = max_context_tokens - self.max_new_tokens
        if self.max_input_tokens <= 0:
            raise ValueError(f"the context ({max_context_tokens} tokens) leaves no room for a prompt beside "
                             f"{self.max_new_tokens} new tokens")

    def render(self, messages: list[dict], tools: list[dict]) -> list[int]:
        from slime.models.chat_template import render_prompt_ids

        return render_prompt_ids(self.tokenizer, messages, tools)

    async def generate_turn(self, messages: list[dict], tools: list[dict]) -> Turn | None:
        rendered: dict[int, list[int]] = {}  # the ids of each candidate, so the one that fits is not rendered again

        def count(candidate: list[dict]) -> int:
            rendered[id(candidate)] = self.render(candidate, tools)
            return len(rendered[id(candidate)])

        fitted = fit_messages(messages, count, self.max_input_tokens)
        if fitted is None:
            return None
        shown, omitted = fitted
        input_ids = rendered[id(shown)]
        images = self.images_of(shown)
        start = time.monotonic()
        output = await self.client.generate(input_ids=input_ids, sampling_params=self.sampling_params,
                                            return_logprob=True, **({"image_data": images} if images else {}))
        meta = output.get("meta_info") or {}
        if images and meta.get("input_ids") is not None and list(meta["input_ids"]) != input_ids:
            # the trainer scores `input_ids` with these images: they must be the prompt the engine ran
            raise RuntimeError("the engine ran other prompt ids than the policy sent with its images")
        entries = meta.get("output_token_logprobs") or []
        return Turn(input_ids=input_ids, output_ids=[int(e[1]) for e in entries],
                    logprobs=[float(e[0]) for e in entries], text=output.get("text", ""),
                    finish_reason=(meta.get("finish_reason") or {}).get("type", "stop"), omitted_messages=omitted,
                    latency_ms=(time.monotonic() - start) * 1000, images=images or None,
                    weight_version=engine_weight_version(meta))

    def images_of(self, messages: list[dict]) -> list[str]:
        """The images a prompt carries, in order (a text policy: none; see VisionTurnPolicy)."""
        return []


class ScriptedTurnPolicy:
    """A policy that says the given turns in order (then a closing answer): scripted agents for the service's load
    test and for tests of the loop. Ids are the text's bytes, so turn samples stay well-formed."""

    def __init__(self, turns: list[str], final: str = "Done."):
        self.turns, self.final = list(turns), final

    async def generate_turn(self, messages: list[dict], tools: list[dict]) -> Turn:
        text = self.turns.pop(0) if self.turns else self.final
        prompt = json.dumps(messages).encode()
        return Turn(input_ids=list(prompt[-64:]), output_ids=list(text.encode()), logprobs=[0.0] * len(text.encode()),
                    text=text, finish_reason="stop")


def tool_call_text(name: str, arguments: dict, thought: str = "") -> str:
    """A turn that calls one tool, in the format `parse_tool_calls` reads."""
    call = json.dumps({"name": name, "arguments": arguments})
    return f"{thought}\n<tool_call>\n{call}\n</tool_call>" if thought else f"<tool_call>\n{call}\n</tool_call>"
