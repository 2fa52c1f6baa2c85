"""What a method does with a turn once its next state is known: judge it, maybe distil it, decide its sample.

- `rl` (Binary RL): the PRM judge scores the turn; ±1 trains with that reward.
- `opd` (on-policy distillation): the hint judge looks for a hindsight hint in the next state; if one is
  accepted, the teacher scores the exact sampled response under the prompt plus the hint, and the turn
  trains with those per-token teacher log-probs. No hint, no sample.
- `combine`: both at once (the hint judge and the PRM judge run concurrently), one merged sample per turn:
  hint and ±1 → teacher log-probs and the reward; hint only → teacher log-probs, reward 0; ±1 only → the
  reward without teacher data (its OPD term is exactly 0 in the loss); neither → excluded.

With a `TeacherDemonstrator` (`--teacher-demonstrations N`), OPD and Combine also have the hinted teacher write N
replies of its own for every turn with an accepted hint; each becomes one more sample (`demonstrations.py`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, field

from slime.conversation.demonstrations import Demonstration, TeacherDemonstrator
from slime.conversation.judges.base import Judge, Judgement, TurnForJudge
from slime.conversation.samples import Decision, binary_rl_decision
from slime.conversation.teacher import TeacherPromptBuilder, TeacherScores, score_prompt
from slime.engine.client import AsyncEngineClient

log = logging.getLogger("slime.conversation")

METHODS = ("rl", "opd", "combine")


@dataclass
class Outcome:
    judgement: dict  # stored with the turn: score, every vote, rationale; the hint under extras["hint"]
    decision: Decision
    teacher: TeacherScores | None = None
    demonstrations: list[Demonstration] = field(default_factory=list)  # teacher-written replies to train on


class TeacherScorer:
    """The teacher side of distillation: a frozen engine (or the policy itself, for self-distillation)
    scoring the student's exact response ids under the hinted prompt, at the trainer's temperature."""

    def __init__(self, engine_url: str, tokenizer, *, temperature: float, top_k: int = 0, api_key: str | None = None,
                 timeout: float = 300.0, max_concurrency: int = 3):
        self.client = AsyncEngineClient(engine_url, api_key=api_key, timeout=timeout)
        self.builder = TeacherPromptBuilder(tokenizer)
        self.temperature = temperature
        self.top_k = top_k
        self.slots = asyncio.Semaphore(max_concurrency)
        self.stats = {"calls": 0, "failures": 0}

    async def score(self, turn, hint: str) -> TeacherScores:
        prompt = await asyncio.to_thread(self.builder.build_for_turn, turn, hint)
        async with self.slots:
            self.stats["calls"] += 1
            try:
                return await score_prompt(self.client, prompt, self.temperature, self.top_k)
            except Exception:
                self.stats["failures"] += 1
                raise

    async def overlap(self, turn, hint: str) -> float:
        """How close the hinted teacher is to what the student did: minus the mean absolute per-token
        log-ratio on the sampled tokens (used to choose among several candidate hints, `--hint-select overlap`)."""
        scores = await self.score(turn, hint)
        student = turn.response_logprobs
        pairs = list(zip(scores.log_probs, student))
        return -sum(abs(t - s) for t, s in pairs) / max(1, len(pairs))

    async def aclose(self) -> None:
        await self.client.aclose()


class BinaryRL:
    name = "rl"

    def __init__(self, judge: Judge):
        self.judge = judge

    async def evaluate(self, turn, view: TurnForJudge, verdict: Judgement | None = None) -> Outcome:
        judgement = (verdict or await self.judge.judge(view)).to_dict()
        turn.judgement = judgement
        return Outcome(judgement, binary_rl_decision(turn))

    async def aclose(self) -> None:
        await self.judge.aclose()


class Distillation:
    """OPD (`judge=None`) or Combine (`judge` = the PRM judge whose ±1 becomes the reward)."""

    def __init__(self, hint_judge, teacher: TeacherScorer, judge: Judge | None = None,
                 demonstrator: TeacherDemonstrator | None = None):
        self.hint_judge = hint_judge
        self.teacher = teacher
        self.judge = judge
        self.demonstrator = demonstrator
        self.name = "combine" if judge is not None else "opd"

    async def evaluate(self, turn, view: TurnForJudge, verdict: Judgement | None = None) -> Outcome:
        """`verdict`: the user's own rating (feedback endpoint), which replaces the PRM judge's."""
        hint_task = asyncio.ensure_future(self.hint_judge.hint(view))
        prm_task = (asyncio.ensure_future(self.judge.judge(view))
                    if self.judge is not None and verdict is None else None)
        hint = await hint_task
        prm: Judgement | None = verdict if verdict is not None else (await prm_task if prm_task is not None else None)
        teacher, teacher_error = None, None
        demonstrations, demonstration_error = [], None
        if hint.accepted:
            try:
                teacher = await self.teacher.score(turn, hint.hint)
            except Exception as exc:  # counted and recorded: the turn falls back to what the PRM says
                teacher_error = f"{type(exc).__name__}: {exc}"
                log.warning("teacher scoring failed for turn %s: %s", turn.id, teacher_error)
            if self.demonstrator is not None:
                try:
                    demonstrations = await self.demonstrator.demonstrate(turn, hint.hint)
                except Exception as exc:  # the turn's own sample does not depend on its demonstrations
                    demonstration_error = f"{type(exc).__name__}: {exc}"
                    log.warning("teacher demonstration failed for turn %s: %s", turn.id, demonstration_error)
        score = float(prm.score) if prm is not None and not prm.failed else 0.0
        judgement = {
            "score": score,
            "votes": [asdict(v) for v in (prm.votes if prm is not None else [])]
                     + [asdict(v) | {"source": f"hint:{v.source}"} for v in hint.votes],
            "judge": f"{self.name}:{getattr(self.hint_judge, 'name', 'hint')}"
                     + (f"+{self.judge.name}" if self.judge is not None else ""),
            "rationale": (prm.rationale if prm is not None else "") or hint.hint,
            "failed": bool(hint.failed and (prm is None or prm.failed)),
            "extras": {"hint": hint.to_dict(), "teacher_error": teacher_error,
                       "prm": prm.to_dict() if prm is not None else None},
        }
        if self.demonstrator is not None:
            judgement["extras"].update(demonstrations=len(demonstrations), demonstration_error=demonstration_error)
        return Outcome(judgement, self._decide(turn, teacher, score, hint.failed, teacher_error), teacher,
                       demonstrations)

    def _decide(self, turn, teacher, score, hint_failed, teacher_error) -> Decision:
        if not turn.next_state:
            return Decision(False, reason="no_next_state")
        if not turn.response_ids:
            return Decision(False, reason="empty_response")
        if self.judge is None:  # OPD: only the teacher signal trains
            if teacher is not None:
                return Decision(True, reward=score)
            return Decision(False, reason="teacher_failed" if teacher_error else
                            ("judge_failed" if hint_failed else "no_hint"))
        if teacher is not None or score != 0.0:
            return Decision(True, reward=score)
        return Decision(False, reason="teacher_failed" if teacher_error else "no_signal")

    async def aclose(self) -> None:
        await self.hint_judge.aclose()
        await self.teacher.aclose()
        if self.demonstrator is not None:
            await self.demonstrator.aclose()
        if self.judge is not None:
            await self.judge.aclose()
