"""The LLM hint judge: m sampled votes, each `\\boxed{1|-1}` plus an optional `[HINT_START]...[HINT_END]`.

Voting machinery (per-vote deadline, one concurrency bound shared by every turn, counted failures,
never raising) is `LLMJudge`'s; only the prompt, the allowed scores and the selection differ. Selection:
candidates are positive votes whose hint is longer than `min_hint_chars`; the longest hint
wins (first on ties), or, with `select="overlap"`, the one a teacher-overlap scorer rates highest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from slime.conversation.judges.base import TurnForJudge
from slime.conversation.judges.hint_prompts import build_hint_messages
from slime.conversation.judges.hints import HintResult, HintScorer, choose, hint_candidates, parse_hint, select_longest
from slime.conversation.judges.llm import LLMJudge

__all__ = ["LLMHintJudge", "SELECT_MODES"]

SELECT_MODES = ("longest", "overlap")


class LLMHintJudge(LLMJudge):
    name = "llm"
    allowed_scores = (1, -1)

    def __init__(
        self,
        engine_url: str,
        *,
        api_key: str | None = None,
        m: int = 1,
        temperature: float = 0.6,
        max_new_tokens: int = 1024,
        timeout: float = 60.0,
        max_concurrency: int = 4,
        min_hint_chars: int = 10,
        select: str = "longest",
        overlap_scorer: Callable[[TurnForJudge, str], Awaitable[float]] | None = None,
        model: str | None = None,
        request_chars: int = 4000,
        state_chars: int = 4000,
        response_chars: int = 8000,
        seed: int | None = None,
        extra_body: dict | None = None,
    ):
        if select not in SELECT_MODES:
            raise ValueError(f"select must be one of {', '.join(SELECT_MODES)}, not {select!r}")
        super().__init__(engine_url, api_key=api_key, m=m, temperature=temperature, max_new_tokens=max_new_tokens,
                         timeout=timeout, max_concurrency=max_concurrency, model=model, request_chars=request_chars,
                         state_chars=state_chars, response_chars=response_chars, seed=seed, extra_body=extra_body)
        self.min_hint_chars = min_hint_chars
        self.select = select
        self.overlap_scorer = overlap_scorer  # overlap_scorer(turn, hint) -> float, higher = closer to the student
        self.stats["accepted"] = 0

    def prompt(self, turn: TurnForJudge) -> list[dict]:
        return build_hint_messages(turn.response_message, turn.next_state, turn.prompt_messages,
                                   request_chars=self.request_chars, response_chars=self.response_chars,
                                   state_chars=self.state_chars)

    async def hint(self, turn: TurnForJudge, scorer: HintScorer | None = None) -> HintResult:
        """The turn's hint. With `select="overlap"` and several candidates, `scorer(hint)` (or the
        configured `overlap_scorer(turn, hint)`) picks among them; without either, the longest wins."""
        self.stats["calls"] += 1
        messages = self.prompt(turn)
        base_seed = self._seeds.randrange(2**31)
        votes = list(await asyncio.gather(*(self._vote(messages, base_seed + i) for i in range(self.m))))
        hints = [parse_hint(vote.rationale) if vote.error is None else "" for vote in votes]
        candidates = hint_candidates([vote.score for vote in votes], hints, self.min_hint_chars)
        extras: dict = {"vote_hints": hints, "candidates": candidates, "select": "longest"}
        chosen = select_longest(hints, candidates)
        if chosen is not None and len(candidates) > 1 and self.select == "overlap":
            if scorer is None and self.overlap_scorer is not None:
                def scorer(hint: str, _turn=turn):
                    return self.overlap_scorer(_turn, hint)
            if scorer is not None:
                index, scores = await choose([hints[i] for i in candidates], scorer)
                chosen = candidates[index]
                extras.update(select="overlap", overlap_scores=scores)
            else:
                extras["select"] = "longest (overlap requested, no scorer)"
        failed = all(vote.score is None for vote in votes)
        if chosen is None:
            return HintResult(accepted=False, hint="", votes=votes, judge=self.name, failed=failed, extras=extras)
        self.stats["accepted"] += 1
        extras["chosen"] = chosen
        return HintResult(accepted=True, hint=hints[chosen], votes=votes, judge=self.name, extras=extras)
