"""Conversations between a persona and the served agent, and the held-out evaluation.

An *interaction* is one assistant turn the user reacts to (one judged main-line turn, i.e. one training
sample). A conversation starts with the persona's request; when the persona asks for another attempt
(a correction or "try again") and `max_turns` allows, its reaction is the next chat message and the agent
answers again in the same session; otherwise the reaction is sent through `/v1/feedback`, which makes it the
last turn's next state without asking the agent for another reply.

Evaluation asks each held-out request once per sample, as a *side* request (served by the live policy, never
trained on), with a fixed seed per prompt and sample (give each training seed its own `seed` for fresh samples),
and rates the first response. "Told" evaluations append a hint to the request the way the OPD teacher sees one:
the hints our rules hint judge writes from the persona's corrections (`judge_hints`, what OPD actually learns
from), or the persona's own statement of its preference.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import asdict, dataclass, field
from statistics import mean
from typing import Protocol

from slime.conversation.judges.hint_rules import user_feedback_hint
from slime.conversation.teacher import hinted_messages
from personalization.client import ServerClient
from personalization.personas import MET, Persona, Reaction, heldout_requests
from personalization.problems import Problem
from personalization.rating import Rating

__all__ = ["EvalResult", "Generation", "Interaction", "Reactor", "ScriptedReactor", "converse", "evaluate",
           "is_pleased", "judge_hints", "told_hints"]


@dataclass(frozen=True)
class Generation:
    max_tokens: int = 256
    temperature: float = 0.6
    stream: bool = True


@dataclass
class Interaction:
    index: int
    problem_id: str
    session_id: str
    request: str
    response: str
    preference: float
    quality: float
    reaction: str
    reaction_kind: str
    turn: int  # 1 for the first attempt, 2 for a retry, ...


def _system(system_prompt: str | None) -> list[dict]:
    return [{"role": "system", "content": system_prompt}] if system_prompt else []


class Reactor(Protocol):
    """How the user answers a reply: the persona's scripted reactions (`ScriptedReactor`), or an LLM playing the
    persona (`personalization.llm_user.LLMReactor`)."""

    async def react(self, persona: Persona, rating: Rating, rng: random.Random, can_retry: bool,
                    messages: list[dict], reply: str) -> Reaction: ...


class ScriptedReactor:
    async def react(self, persona: Persona, rating: Rating, rng: random.Random, can_retry: bool,
                    messages: list[dict], reply: str) -> Reaction:
        return persona.react(rating, rng, can_retry)


async def converse(client: ServerClient, persona: Persona, problem: Problem, rng: random.Random, *,
                   max_turns: int = 2, generation: Generation = Generation(), system_prompt: str | None = None,
                   first_index: int = 0, session_prefix: str = "sim",
                   reactor: Reactor | None = None) -> list[Interaction]:
    """One conversation about `problem`; returns one Interaction per assistant turn (1..max_turns)."""
    reactor = reactor or ScriptedReactor()
    session_id = f"{session_prefix}-{persona.name}-{uuid.uuid4().hex[:12]}"
    request = persona.request(problem, rng)
    messages = _system(system_prompt) + [{"role": "user", "content": request}]
    done: list[Interaction] = []
    for turn in range(1, max_turns + 1):
        reply = await client.chat(messages, session_id, max_tokens=generation.max_tokens,
                                  temperature=generation.temperature, stream=generation.stream)
        rating = persona.rate(reply.content, problem)
        reaction = await reactor.react(persona, rating, rng, turn < max_turns, messages, reply.content)
        done.append(Interaction(first_index + len(done), problem.id, session_id, messages[-1]["content"],
                                reply.content, rating.preference, rating.quality, reaction.text, reaction.kind,
                                turn))
        if reaction.wants_retry:
            messages = messages + [{"role": "assistant", "content": reply.content},
                                   {"role": "user", "content": reaction.text}]
            continue
        await client.feedback(session_id, reaction.text)
        break
    return done


def is_pleased(preference: float, quality: float) -> bool:
    """What the persona's reaction follows: the preference met and the task still done."""
    return preference >= MET and quality > 0


def judge_hints(persona: Persona) -> list[str]:
    """The hints the CPU rules hint judge writes from each of the persona's corrections, in order, without
    repeats: what the OPD teacher is actually told (a correction it reads no hint from is left out)."""
    hints: list[str] = []
    for correction in persona.corrections:
        match, _ = user_feedback_hint(correction)
        if match is not None and match.hint not in hints:
            hints.append(match.hint)
    return hints


def told_hints(persona: Persona, source: str) -> list[str]:
    """The hints of a "told" evaluation: `judge` (the rules judge's, from the corrections) or `persona` (the
    persona's own statement of its preference)."""
    if source == "judge":
        hints = judge_hints(persona)
        if not hints:
            raise ValueError(f"the rules hint judge reads no hint from any correction of {persona.name!r}")
        return hints
    if source == "persona":
        return [persona.hint]
    raise ValueError(f"told hint source must be 'judge' or 'persona', not {source!r}")


@dataclass
class EvalResult:
    preference: float
    quality: float
    n: int
    hint: bool
    pleased: float = 0.0  # share of replies that please the persona (is_pleased)
    items: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {"preference": self.preference, "quality": self.quality, "pleased": self.pleased, "n": self.n,
                "hint": self.hint}

    def to_dict(self) -> dict:
        return asdict(self)


async def evaluate(client: ServerClient, persona: Persona, problems: list[Problem], *,
                   hints: list[str] | None = None, samples_per_prompt: int = 1,
                   generation: Generation = Generation(), system_prompt: str | None = None, concurrency: int = 8,
                   seed: int = 1234) -> EvalResult:
    """Mean preference, quality and pleased rate of the first response to each held-out request.

    Told evaluations (what the model can do when told) append a hint to each request the way the OPD teacher
    sees one: `hints` cycled over the items (`told_hints` gives the judge's or the persona's own). Sample k of
    problem i is sampled with seed `seed + 1000 k + i`, and samples after the first are phrased anew (a fresh
    request template draw), so a different `seed` gives fresh samples of everything."""
    phrasings = [heldout_requests(persona, problems, seed=seed if k == 0 else f"{seed}:{k}")
                 for k in range(samples_per_prompt)]
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, problem: Problem, k: int) -> dict:
        messages = _system(system_prompt) + [{"role": "user", "content": phrasings[k][i]}]
        hint = hints[(i + k) % len(hints)] if hints else None
        if hint:
            messages = hinted_messages(messages, hint)
        async with gate:
            reply = await client.chat(messages, f"eval-{persona.name}-{uuid.uuid4().hex[:12]}", side=True,
                                      max_tokens=generation.max_tokens, temperature=generation.temperature,
                                      seed=seed + 1000 * k + i, stream=generation.stream)
        rating = persona.rate(reply.content, problem)
        item = {"problem_id": problem.id, "sample": k, "request": phrasings[k][i], "response": reply.content,
                "pleased": is_pleased(rating.preference, rating.quality), **rating.to_dict()}
        if hint:
            item["hint"] = hint
        return item

    items = await asyncio.gather(*[one(i, p, k) for k in range(samples_per_prompt) for i, p in enumerate(problems)])
    return EvalResult(preference=round(mean(x["preference"] for x in items), 4),
                      quality=round(mean(x["quality"] for x in items), 4), n=len(items), hint=bool(hints),
                      pleased=round(mean(float(x["pleased"]) for x in items), 4), items=list(items))
