"""The LLM (PRM) judge: m sampled votes from a judge model behind our engine protocol, majority wins.

Every vote has a deadline, and engine load is bounded by one semaphore that all turns share, so a hung or
overloaded judge engine costs a neutral score, never a stuck turn.
"""

from __future__ import annotations

import asyncio
import random
import time

from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.judges.prompts import build_prm_messages
from slime.conversation.judges.voting import majority_vote, parse_boxed_score
from slime.engine.client import AsyncEngineClient

__all__ = ["LLMJudge"]


class LLMJudge:
    name = "llm"
    allowed_scores: tuple[int, ...] = (1, -1, 0)  # a valid vote's values (the hint judge allows only +1 / -1)

    def __init__(
        self,
        engine_url: str,
        *,
        api_key: str | None = None,
        m: int = 3,
        temperature: float = 0.6,
        max_new_tokens: int = 1024,
        timeout: float = 60.0,
        max_concurrency: int = 4,
        model: str | None = None,
        request_chars: int = 4000,
        state_chars: int = 4000,
        response_chars: int = 8000,
        seed: int | None = None,
        extra_body: dict | None = None,
    ):
        if m < 1:
            raise ValueError("m (votes per turn) must be >= 1")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.m = m
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.timeout = timeout
        self.model = model
        self.request_chars = request_chars
        self.state_chars = state_chars
        self.response_chars = response_chars
        self.extra_body = dict(extra_body or {})  # e.g. chat_template_kwargs for a thinking model
        self._client = AsyncEngineClient(engine_url, api_key=api_key, timeout=timeout)
        # Shared by every turn: it is the judge engine's load we bound, not one turn's.
        self._slots = asyncio.Semaphore(max_concurrency)
        self._seeds = random.Random(seed)
        self.stats = {"calls": 0, "votes": 0, "failures": 0, "timeouts": 0, "unparseable": 0}

    def prompt(self, turn: TurnForJudge) -> list[dict]:
        return build_prm_messages(turn.response_message, turn.next_state, turn.prompt_messages,
                                  request_chars=self.request_chars, response_chars=self.response_chars,
                                  state_chars=self.state_chars)

    async def judge(self, turn: TurnForJudge) -> Judgement:
        self.stats["calls"] += 1
        messages = self.prompt(turn)
        # Distinct seeds so the m votes are m different samples, reproducible when `seed` is given.
        base_seed = self._seeds.randrange(2**31)
        votes = await asyncio.gather(*(self._vote(messages, base_seed + i) for i in range(self.m)))
        score = majority_vote([vote.score for vote in votes])
        rationale = ""
        if score != 0:
            rationale = next(vote.rationale for vote in votes if vote.score == score)
        return Judgement(score=score, votes=list(votes), judge=self.name, rationale=rationale,
                         failed=all(vote.score is None for vote in votes))

    async def _vote(self, messages: list[dict], seed: int) -> Vote:
        body = {**self.extra_body, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_new_tokens, "seed": seed}
        if self.model:
            body["model"] = self.model
        async with self._slots:
            self.stats["votes"] += 1
            started = time.monotonic()
            try:
                response = await asyncio.wait_for(self._client.chat(body), self.timeout)
                text = _response_text(response)
            except asyncio.TimeoutError:
                self.stats["failures"] += 1
                self.stats["timeouts"] += 1
                return Vote(score=None, rationale="", source=self.name, error="timeout",
                            seconds=time.monotonic() - started)
            except Exception as exc:  # an engine problem is a failed vote, never a failed turn
                self.stats["failures"] += 1
                return Vote(score=None, rationale="", source=self.name,
                            error=f"engine error: {type(exc).__name__}: {exc}", seconds=time.monotonic() - started)
        seconds = time.monotonic() - started
        score = parse_boxed_score(text, self.allowed_scores)
        if score is None:
            self.stats["unparseable"] += 1
            return Vote(score=None, rationale=text, source=self.name, error="unparseable", seconds=seconds)
        return Vote(score=score, rationale=text, source=self.name, seconds=seconds)

    async def aclose(self) -> None:
        await self._client.aclose()


def _response_text(response: dict) -> str:
    """The judge model's full output: reasoning (when the engine split it off) then the answer."""
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ValueError(f"chat response has no choices[0].message: {str(response)[:200]}") from None
    reasoning = message.get("reasoning_content") or ""
    content = message.get("content") or ""
    return f"{reasoning}\n{content}" if reasoning else content
