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

With `opening_tokens` T the teacher writes only how the reply opens, and the policy writes the rest. When a hint is
about the opening ("start with Sure!"), the first few tokens are where teacher and student differ; the rest of a
small hinted teacher's reply is where it drifts (told to greet, it greets and then chats instead of answering; told
to say "Sure!", it often says just that and stops), and imitating it costs task quality. So the teacher writes at
most T tokens under the hinted prompt (a stop token it writes is not kept: the reply goes on), the candidates are
ranked by the log-ratio of those opening tokens alone, and for each one kept the *policy* continues the reply from
the student's prompt plus the opening, as it would sample it. The sample is that whole reply: the teacher's opening
(large positive advantage where the student would not have opened that way) followed by the student's own answer
(about on-policy, so its advantage is the usual OPD signal). A reply whose continuation is nothing but a stop is the
opening alone and teaches stopping after the hinted words: it is dropped (`stats["ended"]`). Measured first without
the continuation (the opening alone, trained as a truncated sample), the hint's words did not transfer: the opening
candidates that did not stop were rarely the hinted ones, since a small teacher that writes "Sure!" often stops there.

With `check_answers` a demonstration is kept only when it still answers the request, by a check the server makes
from the request alone (`answer_check.py`: a body beyond the opening, and the request's numbers or content words):
a reply that only opens ("Sure!") or drifts into small talk is never trained on, however well the hint explains
it. Candidates are checked before they are ranked, so the best of those that answer is kept. The result also
says how many candidates were checked and how many answered, which the evaluator uses to drop the teacher term
of a turn whose hinted teacher answers worse than the policy (`Demonstrations`).

One demonstration costs the teacher engine one generation and one scoring pass (log-probs at the trainer's
temperature, top-K rows when asked), and the policy engine one scoring pass (the student's log-probs of the
same ids, the sample's rollout log-probs); with an opening, each candidate opening also one scoring pass on both
engines (for the ranking) and each kept one a generation on the policy engine (the continuation). The reply ids
are kept as ids from generation to training: never decoded and re-tokenised.

The demonstration is an off-policy sample (the policy did not sample it); the PPO ratio is taken against the
student's log-probs at scoring time like any other sample, so the clip still bounds each step. It carries no
reward: the PRM judged the student's reply, not this one, so under Combine only its OPD term trains.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass

from slime.conversation.answer_check import check_answer
from slime.conversation.judges.prompts import user_requests_text
from slime.conversation.teacher import (TeacherPrompt, TeacherPromptBuilder, TeacherScores, hinted_messages,
                                        request_tools, score_prompt)
from slime.engine.client import AsyncEngineClient

__all__ = ["Demonstration", "Demonstrations", "TeacherDemonstrator", "demonstration_seed", "hint_log_ratio", "keep_best", "only_stops",
           "reply_budget", "without_stop"]


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
    opening_length: int | None = None  # with an opening: the teacher wrote this many tokens, the policy the rest

    @property
    def hint_log_ratio(self) -> float:
        """Mean per-token log π_teacher(y | s + hint) − log π_student(y | s) over the tokens the teacher wrote:
        how much the hint explains them."""
        n = self.opening_length or len(self.response_ids)
        return hint_log_ratio(self.teacher.log_probs[:n], self.student_log_probs[:n])


class Demonstrations(list):
    """The demonstrations kept for a turn (a list), with how many candidates the answer check saw and how many
    of them answered (both 0 without the check)."""

    def __init__(self, kept=(), checked: int = 0, answering: int = 0):
        super().__init__(kept)
        self.checked = checked
        self.answering = answering


@dataclass
class Opening:
    """The first tokens of a reply, written by the teacher under the hinted prompt (a stop token removed)."""

    ids: list[int]
    teacher_log_probs: list[float]
    student_log_probs: list[float]

    @property
    def hint_log_ratio(self) -> float:
        return hint_log_ratio(self.teacher_log_probs, self.student_log_probs)


def hint_log_ratio(teacher_log_probs, student_log_probs) -> float:
    pairs = list(zip(teacher_log_probs, student_log_probs))
    if not pairs:
        raise ValueError("no tokens to compare")
    return sum(t - s for t, s in pairs) / len(pairs)


def keep_best(candidates: list, count: int) -> list:
    """The `count` candidates (demonstrations or openings) with the highest hint log-ratio (ties: the earlier
    candidate), in that order."""
    ranked = sorted(enumerate(candidates), key=lambda pair: (-pair[1].hint_log_ratio, pair[0]))
    return [candidate for _, candidate in ranked[:count]]


def without_stop(output_ids: list[int], meta: dict) -> list[int]:
    """`output_ids` less a final stop token (engines that follow SGLang keep it in the ids and name it in
    `finish_reason.matched`)."""
    reason = meta.get("finish_reason")
    if isinstance(reason, dict) and reason.get("type") == "stop" and output_ids \
            and isinstance(reason.get("matched"), int) and output_ids[-1] == reason["matched"]:
        return output_ids[:-1]
    return output_ids


def only_stops(continuation_ids: list[int], meta: dict) -> bool:
    """True when a continuation wrote nothing but the stop: the reply would be the opening alone."""
    return not without_stop(continuation_ids, meta)


def demonstration_seed(turn_id: int, index: int) -> int:
    """A fixed sampling seed per (turn, demonstration): re-judging a turn writes the same reply again."""
    digest = hashlib.sha256(f"demonstration:{turn_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def reply_budget(request: dict, default: int) -> int:
    """The reply length the client asked for (max_completion_tokens, else max_tokens), capped by `default`."""
    asked = request.get("max_completion_tokens") or request.get("max_tokens")
    try:
        asked = int(asked) if asked is not None else None
    except (TypeError, ValueError):
        asked = None
    return min(asked, default) if asked and asked > 0 else default


def _finish_reason(meta: dict) -> str:
    reason = meta.get("finish_reason")
    if isinstance(reason, dict):  # SGLang: {"type": "stop" | "length" | "abort", "matched": ...}
        reason = reason.get("type")
    return str(reason or "stop")


class TeacherDemonstrator:
    """Writes `count` demonstrations per hinted turn, the best of `candidates` (default `count`: all kept); with
    `opening_tokens` the teacher writes at most that many tokens and the policy continues the reply.

    `teacher` generates and scores under the hinted prompt (the frozen judge engine, or the policy engine for
    self-distillation); `policy` scores the same ids under the student's prompt. Both must serve the policy's
    tokenizer (the teacher prompt is rendered with it), as for OPD scoring.
    """

    def __init__(self, teacher: AsyncEngineClient, policy: AsyncEngineClient, builder: TeacherPromptBuilder, *,
                 count: int, temperature: float, max_new_tokens: int, top_k: int = 0, candidates: int | None = None,
                 opening_tokens: int | None = None, check_answers: bool = False, max_concurrency: int = 2):
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
        self.check_answers = bool(check_answers)
        self.slots = asyncio.Semaphore(max_concurrency)
        self.stats = {"demonstrations": 0, "candidates": 0, "empty": 0, "ended": 0, "failures": 0,
                      "unanswering": 0}

    def hinted_prompt_ids(self, turn, hint: str) -> list[int]:
        request = turn.request
        return self.builder.render_prompt_ids(hinted_messages(request.get("messages") or [], hint),
                                              request_tools(request), request.get("chat_template_kwargs"))

    async def demonstrate(self, turn, hint: str) -> Demonstrations:
        """Up to `count` teacher replies for `turn` (a stored `TurnRow`) under `hint`, the best of `candidates`
        by hint log-ratio; empty replies are skipped, and with `check_answers` so are replies that do not answer
        the request. The candidates are written concurrently (one engine batch)."""
        prompt_ids = await asyncio.to_thread(self.hinted_prompt_ids, turn, hint)
        write = self._opening if self.opening_tokens else self._whole_reply
        written = await asyncio.gather(*(self._counted(write(turn, hint, prompt_ids, index))
                                         for index in range(self.candidates)))
        self.stats["candidates"] += len(written)
        self.stats["empty"] += sum(candidate is None for candidate in written)
        written = [candidate for candidate in written if candidate is not None]
        checked = answering = 0
        if self.opening_tokens:
            # an opening cannot answer yet: each one kept is continued by the policy, then checked whole
            kept = keep_best(written, self.count)
            continued = await asyncio.gather(*(self._counted(self._continue(turn, hint, prompt_ids, opening, index))
                                               for index, opening in enumerate(kept)))
            self.stats["ended"] += sum(demo is None for demo in continued)
            kept = [demo for demo in continued if demo is not None]
            if self.check_answers:
                checked = len(kept)
                kept = self._answering(turn, kept)
                answering = len(kept)
        else:
            if self.check_answers:
                checked = len(written)
                written = self._answering(turn, written)
                answering = len(written)
            kept = keep_best(written, self.count)
        self.stats["demonstrations"] += len(kept)
        return Demonstrations(kept, checked, answering)

    def _answering(self, turn, demonstrations: list[Demonstration]) -> list[Demonstration]:
        request = user_requests_text(turn.request.get("messages") or [])
        kept = [demo for demo in demonstrations if check_answer(demo.text, request).ok]
        self.stats["unanswering"] += len(demonstrations) - len(kept)
        return kept

    async def _counted(self, call):
        async with self.slots:
            try:
                return await call
            except Exception:
                self.stats["failures"] += 1
                raise

    def _sampling(self, budget: int, seed: int) -> dict:
        return {"temperature": self.temperature, "max_new_tokens": budget, "seed": seed}

    async def _generate(self, client: AsyncEngineClient, input_ids: list[int], sampling: dict) -> dict:
        result = await client.generate(input_ids=list(input_ids), sampling_params=sampling)
        return result[0] if isinstance(result, list) else result

    async def _whole_reply(self, turn, hint: str, prompt_ids: list[int], index: int) -> Demonstration | None:
        budget = reply_budget(turn.request, self.max_new_tokens)
        seed = demonstration_seed(turn.id, index)
        result = await self._generate(self.teacher, prompt_ids, self._sampling(budget, seed))
        response_ids = [int(t) for t in result.get("output_ids") or []]
        if not response_ids:
            return None
        return await self._scored(turn, hint, prompt_ids, response_ids, str(result.get("text") or ""),
                                  _finish_reason(result.get("meta_info") or {}), opening_length=None)

    async def _opening(self, turn, hint: str, prompt_ids: list[int], index: int) -> Opening | None:
        budget = min(self.opening_tokens, reply_budget(turn.request, self.max_new_tokens))
        seed = demonstration_seed(turn.id, index)
        result = await self._generate(self.teacher, prompt_ids, self._sampling(budget, seed))
        ids = without_stop([int(t) for t in result.get("output_ids") or []], result.get("meta_info") or {})
        if not ids:
            return None
        teacher = await self.teacher.score(list(prompt_ids), ids, temperature=self.temperature)
        student = await self.policy.score(list(turn.prompt_ids), ids, temperature=self.temperature)
        return Opening(ids, list(teacher.logprobs), list(student.logprobs))

    async def _continue(self, turn, hint: str, prompt_ids: list[int], opening: Opening,
                        index: int) -> Demonstration | None:
        """The policy writes the rest of the reply after the teacher's opening, under the student's prompt."""
        budget = reply_budget(turn.request, self.max_new_tokens) - len(opening.ids)
        if budget < 1:  # the client's whole budget is the opening
            return await self._scored(turn, hint, prompt_ids, opening.ids, "", "length", len(opening.ids))
        seed = demonstration_seed(turn.id, self.candidates + index)  # not a seed any opening used
        result = await self._generate(self.policy, list(turn.prompt_ids) + opening.ids,
                                      self._sampling(budget, seed))
        continuation = [int(t) for t in result.get("output_ids") or []]
        meta = result.get("meta_info") or {}
        if only_stops(continuation, meta):
            return None
        return await self._scored(turn, hint, prompt_ids, opening.ids + continuation, "", _finish_reason(meta),
                                  len(opening.ids))

    async def _scored(self, turn, hint: str, prompt_ids: list[int], response_ids: list[int], text: str,
                      finish_reason: str, opening_length: int | None) -> Demonstration:
        teacher = await score_prompt(self.teacher, TeacherPrompt(prompt_ids, response_ids, hint, []),
                                     self.temperature, self.top_k)
        student = await self.policy.score(list(turn.prompt_ids), response_ids, temperature=self.temperature)
        if not text:
            text = await asyncio.to_thread(self.builder.tokenizer.decode, response_ids, skip_special_tokens=True)
        return Demonstration(response_ids=response_ids, text=text, finish_reason=finish_reason,
                             student_log_probs=list(student.logprobs), teacher=teacher,
                             weight_version=student.weight_version, hint=hint.strip(), opening_length=opening_length)

    async def aclose(self) -> None:
        await self.teacher.aclose()
        if self.policy is not self.teacher:
            await self.policy.aclose()

