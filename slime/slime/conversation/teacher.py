"""Teacher scoring for On-Policy Distillation: the hinted teacher's log-probs of the student's exact response.

A frozen teacher scores exactly the response tokens the student sampled, under the student's prompt with
a hindsight hint appended to the user's last real message:

1. `hinted_messages(messages, hint)` copies the turn's request messages and appends
   `HINT_MARKER + hint` to the last *real* user message (see `hint_target_index`).
2. `TeacherPromptBuilder` renders them with the same code path the engine used for the student's
   prompt (`Engine.render_chat`: the policy tokenizer's chat template, or our ChatML tool template for
   ChatML models whose own template ignores tools; the same `normalize_messages`; the same tools;
   `add_generation_prompt=True`) into `teacher_prompt_ids`. `render_prompt_ids` renders un-hinted
   messages, so `render_prompt_ids(turn messages) == turn.prompt_ids` checks that the renderer matches
   the engine that served the turn (`TeacherPromptBuilder.matches_turn`).
3. The teacher input is `teacher_prompt_ids + response_ids`, concatenated as ids. The student's sampled
   ids are never decoded and re-tokenized, so no merge across the prompt/response boundary can shift the
   alignment.
4. `score_with_hint` makes ONE engine call (`AsyncEngineClient.score`) that returns exactly one teacher
   log-prob per response token, the first one included, and the top-K rows in the same call when
   asked, at the temperature the trainer uses for the student's log-probs (`--rollout-temperature`).

Temperature. Our engine computes input log-probs as log_softmax(logits / T) with the request's
temperature (T=0, greedy, reports T=1; we refuse T<=0 here so that cannot happen silently). Stock SGLang
does not: its LogitsProcessor normalizes input log-probs "w/o temperature, top-p" unless the request's
batch sets `temp_scaled_logprobs`, which `LogitsMetadata.from_forward_batch` never does, so a real
SGLang teacher scores at T=1 whatever the request says. `engine_applies_score_temperature` probes an
engine once (two tiny scoring calls) so a deployment can refuse such a teacher instead of training on
a biased `teacher - old` advantage. With only T=1 log-probs of the sampled token the T-scaled value
cannot be recovered (it needs the log-partition of logits / T over the whole vocabulary).

Teacher choice. The teacher is whatever engine `client` points at: the frozen base model on the judge
(PRM) engine by default, or the policy engine itself for self-distillation (teacher = current policy) -
only the URL differs. Either way the teacher must share the policy's tokenizer and chat template (the
prompt is rendered with the policy tokenizer and the response ids are the policy's), which the
`matches_turn` check and the engine's own token-id echo in `ScoreResult` guard against.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from slime.conversation.openclaw_conventions import INTERNAL_CONTEXT_MARKER, content_text, is_internal_context
from slime.engine.chat_parsing import TEXT_PART_SEPARATOR, ChatInputError, normalize_messages
from slime.engine.client import AsyncEngineClient
from slime.engine.engine import Engine
from slime.engine.protocol import APIError

__all__ = [
    "HINT_MARKER",
    "INTERNAL_CONTEXT_MARKER",
    "TeacherPrompt",
    "TeacherPromptBuilder",
    "TeacherPromptError",
    "TeacherScores",
    "engine_applies_score_temperature",
    "flatten_content",
    "hint_target_index",
    "hinted_messages",
    "is_internal_context",
    "request_tools",
    "score_prompt",
    "score_with_hint",
]

HINT_MARKER = "\n\n[user's hint / instruction]\n"


class TeacherPromptError(ValueError):
    """The teacher prompt cannot be built (blank hint, messages the chat template rejects, ...)."""


# --------------------------------------------------------------------------------------------------
# Hint placement (pure)
# --------------------------------------------------------------------------------------------------


def flatten_content(content: Any) -> str:
    """Message content as the engine's prompt shows it: text parts joined the way `normalize_messages` joins
    them (TEXT_PART_SEPARATOR), null as "". Non-text parts are dropped (the engine refuses them, so a served
    turn never has any). Parts with a `text` key and no `type` (OpenClaw's compaction summary) count as text."""
    return content_text(content, TEXT_PART_SEPARATOR)


def hint_target_index(messages: Sequence[dict]) -> int | None:
    """Index of the message the hint is appended to; None for an empty list.

    The LAST message with role `user` that is not OpenClaw's internal-context message. OpenClaw appends
    that message to every request (also after tool results), so upstream's "last user message" rule would
    put the hint into scratch state the user never wrote, after e.g. "Active exec sessions: none". The
    internal-context message is part of what the student saw, so it stays in the teacher prompt, in place
    and unchanged; the hint goes where the user's own instruction is. In an agent loop that message can
    be several tool steps before the scored response.

    Fallbacks (upstream appends to the last message): no real user message -> the last message that is not
    internal context; only internal-context messages -> the last message.
    """
    if not messages:
        return None
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and not is_internal_context(messages[i]):
            return i
    for i in range(len(messages) - 1, -1, -1):
        if not is_internal_context(messages[i]):
            return i
    return len(messages) - 1


def hinted_messages(messages: Sequence[dict], hint: str) -> list[dict]:
    """A deep copy of `messages` with `HINT_MARKER + hint.strip()` appended to the hint target's text.

    The target's content is flattened to text first (list content becomes one string) and the result is
    stripped as a whole, as upstream does. An empty list becomes one user message holding the marker and
    hint. Roles are left as they are (developer->system happens at rendering, as in the engine). A blank
    hint raises: without an accepted hint there is no OPD sample, and "marker + nothing" is not the
    un-hinted prompt.
    """
    if not isinstance(hint, str) or not hint.strip():
        raise TeacherPromptError("the hint is empty; score un-hinted prompts with render_prompt_ids instead")
    out = copy.deepcopy(list(messages))
    index = hint_target_index(out)
    if index is None:
        return [{"role": "user", "content": (HINT_MARKER + hint.strip()).strip()}]
    target = out[index]
    target["content"] = (flatten_content(target.get("content")) + HINT_MARKER + hint.strip()).strip()
    return out


def request_tools(request: dict) -> list[dict] | None:
    """The tools the engine rendered for a stored request: none when `tool_choice` is "none"
    (as `ChatCompletionRequest.use_tools` decides)."""
    tools = request.get("tools")
    if not tools or request.get("tool_choice") == "none":
        return None
    return tools


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


@dataclass
class TeacherPrompt:
    """What the teacher scores: `prompt_ids` (hinted, rendered) followed by the student's `response_ids`."""

    prompt_ids: list[int]
    response_ids: list[int]
    hint: str
    messages: list[dict]

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)


class TeacherPromptBuilder:
    """Renders chat messages into prompt token ids exactly as our engine's /v1/chat/completions does.

    It runs the engine's own `Engine.render_chat` on the policy tokenizer (not a copy of it), after the
    same `normalize_messages`, so the teacher prompt cannot drift from the student's.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._renderer = SimpleNamespace(tokenizer=tokenizer)  # all Engine.render_chat reads from `self`

    def render_prompt_ids(self, messages: Sequence[dict], tools: list[dict] | None = None,
                          chat_template_kwargs: dict | None = None) -> list[int]:
        """Prompt ids of `messages` (OpenAI shape, not normalised) with `tools`, ending in the generation prompt."""
        try:
            normalized = normalize_messages(list(messages))
            return Engine.render_chat(self._renderer, normalized, tools or None, chat_template_kwargs)
        except ChatInputError as exc:
            raise TeacherPromptError(f"cannot render the messages: {exc}") from None
        except APIError as exc:
            raise TeacherPromptError(str(exc)) from None

    def render_request_prompt_ids(self, request: dict) -> list[int]:
        """Prompt ids of a stored request ({messages, tools, tool_choice, chat_template_kwargs, ...})."""
        return self.render_prompt_ids(request.get("messages") or [], request_tools(request),
                                      request.get("chat_template_kwargs"))

    def matches_turn(self, turn) -> bool:
        """Whether rendering the turn's stored request reproduces the prompt ids the engine sampled from."""
        try:
            return self.render_request_prompt_ids(turn.request) == list(turn.prompt_ids)
        except TeacherPromptError:
            return False

    def build(self, messages: Sequence[dict], tools: list[dict] | None, response_ids: Sequence[int], hint: str,
              chat_template_kwargs: dict | None = None) -> TeacherPrompt:
        if len(response_ids) == 0:
            raise TeacherPromptError("the response is empty: nothing to score")
        hinted = hinted_messages(messages, hint)
        return TeacherPrompt(
            prompt_ids=self.render_prompt_ids(hinted, tools, chat_template_kwargs),
            response_ids=[int(t) for t in response_ids],
            hint=hint.strip(),
            messages=hinted,
        )

    def build_for_turn(self, turn, hint: str) -> TeacherPrompt:
        """The teacher prompt of a stored turn (`TurnRow`): its request plus `hint`, then its response ids."""
        request = turn.request
        return self.build(request.get("messages") or [], request_tools(request), turn.response_ids, hint,
                          request.get("chat_template_kwargs"))


# --------------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------------


@dataclass
class TeacherScores:
    """Teacher log-probs of the student's response: entry i belongs to response token i (len R)."""

    log_probs: list[float]
    topk_log_probs: list[list[float]] | None  # [R][K], descending, when top_k > 0
    topk_indices: list[list[int]] | None  # [R][K]
    prompt_len: int  # length of the hinted teacher prompt (the response starts there)
    weight_version: str = ""


def _check_temperature(temperature: float) -> float:
    temperature = float(temperature)
    if not temperature > 0:
        # temperature 0 means greedy to an engine, which then reports T=1 log-probs: never what the trainer uses
        raise ValueError(f"teacher scoring needs the trainer's rollout temperature (> 0), got {temperature}")
    return temperature


async def score_prompt(client: AsyncEngineClient, prompt: TeacherPrompt, temperature: float,
                       top_k: int = 0) -> TeacherScores:
    """Score `prompt.response_ids` after `prompt.prompt_ids` in one engine call (log-probs and top-K together)."""
    temperature = _check_temperature(temperature)
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    result = await client.score(prompt.prompt_ids, prompt.response_ids, temperature=temperature,
                                top_logprobs_num=top_k)
    R = len(prompt.response_ids)
    if len(result.logprobs) != R:  # parse_score already checks this; keep the contract local too
        raise ValueError(f"teacher returned {len(result.logprobs)} log-probs for {R} response tokens")
    topk_values = topk_indices = None
    if top_k > 0:
        rows = result.top_logprobs or []
        short = next((i for i, row in enumerate(rows) if len(row) != top_k), None)
        if len(rows) != R or short is not None:
            raise ValueError(
                f"teacher returned {len(rows)} top-{top_k} rows for {R} response tokens"
                + (f"; row {short} has {len(rows[short])} entries" if short is not None else ""))
        topk_values = [[lp for lp, _ in row] for row in rows]
        topk_indices = [[token for _, token in row] for row in rows]
    return TeacherScores(log_probs=list(result.logprobs), topk_log_probs=topk_values, topk_indices=topk_indices,
                         prompt_len=prompt.prompt_len, weight_version=result.weight_version)


async def score_with_hint(client: AsyncEngineClient, tokenizer, messages: Sequence[dict], tools: list[dict] | None,
                          response_ids: Sequence[int], hint: str, temperature: float, top_k: int = 0,
                          chat_template_kwargs: dict | None = None) -> TeacherScores:
    """Teacher log-probs of `response_ids` under `messages` with `hint` appended (see the module docstring).

    `tokenizer` is the POLICY tokenizer (or a TeacherPromptBuilder around it). `temperature` must be the
    trainer's `--rollout-temperature`. One engine call, even with `top_k > 0`.
    """
    builder = tokenizer if isinstance(tokenizer, TeacherPromptBuilder) else TeacherPromptBuilder(tokenizer)
    prompt = builder.build(messages, tools, response_ids, hint, chat_template_kwargs)
    return await score_prompt(client, prompt, temperature, top_k)


async def engine_applies_score_temperature(client: AsyncEngineClient, prompt_ids: Sequence[int],
                                           response_ids: Sequence[int], temperature: float,
                                           tolerance: float = 1e-4) -> bool:
    """Whether the engine's input (prompt) log-probs follow the request's temperature (the teacher must score at
    the trainer's temperature).

    Scores the same ids at T=1 and at `temperature`; an engine that ignores the temperature (stock
    SGLang) returns the same numbers twice. Meaningless at temperature 1; use a response of a few tokens
    whose distribution is not degenerate.
    """
    temperature = _check_temperature(temperature)
    if abs(temperature - 1.0) < 1e-6:
        return True
    at_one = await client.score(prompt_ids, response_ids, temperature=1.0)
    scaled = await client.score(prompt_ids, response_ids, temperature=temperature)
    return any(abs(a - b) > tolerance for a, b in zip(at_one.logprobs, scaled.logprobs))
