"""Teacher demonstrations: replies the hinted teacher writes itself, trained under the student's prompt.

Token-level OPD scores the tokens the *student* sampled. When the hint asks for something the student never
samples (open with "Sure!"), the only per-token signal is "the token you chose is less likely under the
hint", which pushes the student's choice down without saying what to write instead. A demonstration closes
that gap: for a turn with an accepted hint the teacher *generates* a reply under the hinted prompt, and the
reply is trained as if the student had written it, under the student's own (un-hinted) prompt, with the same
OPD advantage `teacher - old` per token. Where the teacher's choice is one the student rarely makes, that
advantage is large and positive; where they agree it is about 0. This is context distillation (the hint's
effect moved into the weights) carried by the existing OPD/Combine loss, with no new loss term.

With `candidates > count` the teacher writes `candidates` replies and the `count` kept are the ones the hint
explains best: the highest mean per-token log-ratio `log π_teacher(y | s + hint) − log π_student(y | s)`, i.e.
the replies that are most likely with the hint relative to without it. A small teacher follows a hint only
some of the time; this picks the replies where it did, by a measure that needs no knowledge of what the hint
asked for.

With `max_tokens` (an opening, not a whole reply) the teacher writes only the first `max_tokens` tokens. When a
hint is about how a reply opens ("start with Sure!"), those few tokens are where teacher and student differ; the
rest of a hinted teacher's reply is where a small teacher drifts (it greets and then chats instead of answering),
and imitating it costs task quality. A truncated demonstration trains the opening only and leaves the answer to the
student's own on-policy samples. Under the default sample-mean loss it also concentrates the sample's weight on
those tokens (1/16 each for 16 tokens, against about 1/150 in a whole reply). A candidate that *ends* within the
opening ("Sure!" and stop) is a whole reply, not an opening: it would teach stopping after the hinted words, and its
log-ratio (every token explained by the hint) would outrank every real opening; it is dropped (`stats["ended"]`).

One demonstration costs the teacher engine one generation and one scoring pass (log-probs at the trainer's
temperature, top-K rows when asked), and the policy engine one scoring pass (the student's log-probs of the
same ids, the sample's rollout log-probs). The reply ids are kept as ids from generation to training: never
decoded and re-tokenised.

The demonstration is an off-policy sample (the policy did not sample it); the PPO ratio is taken against the
student's log-probs at scoring time like any other sample, so the clip still bounds each step. It carries no
reward: the PRM judged the student's reply, not this one, so under Combine only its OPD term trains.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from slime.conversation.teacher import (TeacherPrompt, TeacherPromptBuilder, TeacherScores, hinted_messages,
                                        request_tools, score_prompt)
from slime.engine.client import AsyncEngineClient

__all__ = ["Demonstration", "TeacherDemonstrator", "demonstration_seed", "hint_log_ratio", "keep_best", "only_openings",
           "reply_budget"]


@dataclass
class Demonstration:
    """One teacher-written reply: `response_ids` after the student's prompt, scored by both models."""

    response_ids: list[int]
    text: str
    finish_reason: str
    student_log_probs: list[float]  # the policy's log-probs of response_ids under the un-hinted prompt
    teacher: TeacherScores  # the teacher's, under the hinted prompt (what the OPD advantage compares with)
    weight_version: str  # the policy weights that produced student_log_probs
    hint: str

    @property
    def hint_log_ratio(self) -> float:
        """Mean per-token log π_teacher(y | s + hint) − log π_student(y | s): how much the hint explains y."""
        return hint_log_ratio(self.teacher.log_probs, self.student_log_probs)


def hint_log_ratio(teacher_log_probs, student_log_probs) -> float:
    pairs = list(zip(teacher_log_probs, student_log_probs))
    if not pairs:
        raise ValueError("no tokens to compare")
    return sum(t - s for t, s in pairs) / len(pairs)


def keep_best(demonstrations: list[Demonstration], count: int) -> list[Demonstration]:
    """The `count` demonstrations with the highest hint log-ratio (ties: the earlier candidate), in that order."""
    ranked = sorted(enumerate(demonstrations), key=lambda pair: (-pair[1].hint_log_ratio, pair[0]))
    return [demo for _, demo in ranked[:count]]


def only_openings(demonstrations: list[Demonstration]) -> list[Demonstration]:
    """The demonstrations cut at the opening budget (finish "length"); one that stopped inside it is a whole reply."""
    return [demo for demo in demonstrations if demo.finish_reason == "length"]


def demonstration_seed(turn_id: int, index: int) -> int:
    """A fixed sampling seed per (turn, demonstration): re-judging a turn writes the same reply again."""
    digest = hashlib.sha256(f"demonstration:{turn_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def reply_budget(request: dict, default: int, opening: int | None = None) -> int:
    """The reply length the client asked for (max_completion_tokens, else max_tokens), capped by `default`, and
    by `opening` when only the opening of a reply is demonstrated."""
    asked = request.get("max_completion_tokens") or request.get("max_tokens")
    try:
        asked = int(asked) if asked is not None else None
    except (TypeError, ValueError):
        asked = None
    budget = min(asked, default) if asked and asked > 0 else default
    return min(budget, opening) if opening else budget


def _finish_reason(meta: dict) -> str:
    reason = meta.get("finish_reason")
    if isinstance(reason, dict):  # SGLang: {"type": "stop" | "length" | "abort", "matched": ...}
        reason = reason.get("type")
    return str(reason or "stop")


class TeacherDemonstrator:
    """Writes `count` demonstrations per hinted turn, the best of `candidates` (default `count`: all kept), each
    at most `opening_tokens` long when set (the opening of a reply only).

    `teacher` generates and scores under the hinted prompt (the frozen judge engine, or the policy engine for
    self-distillation); `policy` scores the same ids under the student's prompt. Both must serve the policy's
    tokenizer (the teacher prompt is rendered with it), as for OPD scoring.
    """

    def __init__(self, teacher: AsyncEngineClient, policy: AsyncEngineClient, builder: TeacherPromptBuilder, *,
                 count: int, temperature: float, max_new_tokens: int, top_k: int = 0, candidates: int | None = None,
                 opening_tokens: int | None = None, max_concurrency: int = 2):
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        candidates = count if candidates is None else candidates
        if candidates < count:
            raise ValueError(f"candidates ({candidates}) must be >= count ({count})")
        if not temperature > 0:
            raise ValueError(f"demonstrations are sampled at the trainer's temperature (> 0), got {temperature}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if opening_tokens is not None and opening_tokens < 1:
            raise ValueError(f"opening_tokens must be >= 1 (or None for whole replies), got {opening_tokens}")
        self.teacher = teacher
        self.policy = policy
        self.builder = builder
        self.count = count
        self.candidates = candidates
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self.opening_tokens = opening_tokens
        self.top_k = int(top_k)
        self.slots = asyncio.Semaphore(max_concurrency)
        self.stats = {"demonstrations": 0, "candidates": 0, "empty": 0, "ended": 0, "failures": 0}

    def hinted_prompt_ids(self, turn, hint: str) -> list[int]:
        request = turn.request
        return self.builder.render_prompt_ids(hinted_messages(request.get("messages") or [], hint),
                                              request_tools(request), request.get("chat_template_kwargs"))

    async def demonstrate(self, turn, hint: str) -> list[Demonstration]:
        """Up to `count` teacher replies for `turn` (a stored `TurnRow`) under `hint`, the best of `candidates`
        by hint log-ratio; empty replies are skipped, and so, with `opening_tokens`, are replies that end within the
        opening. The candidates are written concurrently (one engine batch)."""
        prompt_ids = await asyncio.to_thread(self.hinted_prompt_ids, turn, hint)

        async def one(index: int) -> Demonstration | None:
            async with self.slots:
                try:
                    return await self._one(turn, hint, prompt_ids, index)
                except Exception:
                    self.stats["failures"] += 1
                    raise

        written = await asyncio.gather(*(one(index) for index in range(self.candidates)))
        self.stats["candidates"] += len(written)
        self.stats["empty"] += sum(demo is None for demo in written)
        written = [demo for demo in written if demo is not None]
        if self.opening_tokens:
            openings = only_openings(written)
            self.stats["ended"] += len(written) - len(openings)
            written = openings
        kept = keep_best(written, self.count)
        self.stats["demonstrations"] += len(kept)
        return kept

    async def _one(self, turn, hint: str, prompt_ids: list[int], index: int) -> Demonstration | None:
        sampling = {"temperature": self.temperature, "max_new_tokens": reply_budget(turn.request, self.max_new_tokens,
                                                                      self.opening_tokens),
                    "seed": demonstration_seed(turn.id, index)}
        result = await self.teacher.generate(input_ids=list(prompt_ids), sampling_params=sampling)
        if isinstance(result, list):
            result = result[0]
        response_ids = [int(t) for t in result.get("output_ids") or []]
        if not response_ids:
            return None
        teacher = await score_prompt(self.teacher, TeacherPrompt(prompt_ids, response_ids, hint, []),
                                     self.temperature, self.top_k)
        student = await self.policy.score(list(turn.prompt_ids), response_ids, temperature=self.temperature)
        return Demonstration(response_ids=response_ids, text=str(result.get("text") or ""),
                             finish_reason=_finish_reason(result.get("meta_info") or {}),
                             student_log_probs=list(student.logprobs), teacher=teacher,
                             weight_version=student.weight_version, hint=hint.strip())

    async def aclose(self) -> None:
        await self.teacher.aclose()
        if self.policy is not self.teacher:
            await self.policy.aclose()

