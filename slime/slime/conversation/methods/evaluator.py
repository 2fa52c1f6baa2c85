"""Gather the signals a method uses for one turn, and let the method decide what the turn becomes.

`TurnEvaluator` runs what the method asks for, concurrently: the reward judge (unless the user rated the turn
themselves), the hint judge, the teacher's scoring of the sampled response under the hinted prompt, and, with
a `TeacherDemonstrator`, replies written by the hinted teacher (each one more sample, `demonstrations.py`).
Turns that cannot train whatever the method says (no next state, an empty response) are excluded here.

Quality protection: when the demonstrator checks its replies and none of the hinted teacher's replies still
answers the request while the policy's own reply does (`answer_check.py`), the teacher answers worse than the
policy, and pulling the policy toward it would cost the task: the turn's teacher term is dropped (Combine keeps
its reward term; OPD alone has no signal left) and the judgement records why.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict, dataclass, field

from slime.conversation.answer_check import check_answer
from slime.conversation.demonstrations import Demonstration, TeacherDemonstrator
from slime.conversation.judges.prompts import user_requests_text
from slime.conversation.openclaw_conventions import message_text
from slime.conversation.judges.base import Judge, Judgement, TurnForJudge
from slime.conversation.methods.base import Decision, TurnSignals
from slime.conversation.teacher import TeacherPromptBuilder, TeacherScores, score_prompt
from slime.engine.client import AsyncEngineClient

log = logging.getLogger("slime.conversation")


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
        # dropped: turns whose teacher term was dropped because the teacher answers worse than the policy
        self.stats = {"calls": 0, "failures": 0, "dropped": 0}

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


class TurnEvaluator:
    """One method with the judges and teacher it uses; `evaluate(turn, view)` -> `Outcome`."""

    def __init__(self, method, judge: Judge | None = None, hint_judge=None, teacher: TeacherScorer | None = None,
                 demonstrator: TeacherDemonstrator | None = None):
        if method.uses_reward_judge and judge is None:
            raise ValueError(f"method {method.name!r} uses the reward judge: give a judge")
        if method.uses_hints and (hint_judge is None or teacher is None):
            raise ValueError(f"method {method.name!r} uses hints: give a hint judge and a teacher")
        if demonstrator is not None and not method.uses_hints:
            raise ValueError(f"teacher demonstrations need a method that uses hints ({method.name!r} does not)")
        self.method = method
        self.judge = judge if method.uses_reward_judge else None
        self.hint_judge = hint_judge if method.uses_hints else None
        self.teacher = teacher if method.uses_hints else None
        self.demonstrator = demonstrator

    @property
    def name(self) -> str:
        return self.method.name

    async def evaluate(self, turn, view: TurnForJudge, verdict: Judgement | None = None) -> Outcome:
        """`verdict`: the user's own rating (feedback endpoint), which replaces the reward judge's."""
        hint_task = asyncio.ensure_future(self.hint_judge.hint(view)) if self.hint_judge is not None else None
        reward = verdict
        if reward is None and self.judge is not None:
            try:
                reward = await self.judge.judge(view)
            except BaseException:
                if hint_task is not None:
                    hint_task.cancel()
                raise
        hint = await hint_task if hint_task is not None else None
        signals = TurnSignals(reward=reward, hint=hint)
        demonstrations, demonstration_error = [], None
        if hint is not None and hint.accepted:
            try:
                signals = TurnSignals(reward=reward, hint=hint, teacher=await self.teacher.score(turn, hint.hint))
            except Exception as exc:  # counted and recorded: the method decides on the signals that remain
                signals = TurnSignals(reward=reward, hint=hint, teacher_error=f"{type(exc).__name__}: {exc}")
                log.warning("teacher scoring failed for turn %s: %s", turn.id, signals.teacher_error)
            if self.demonstrator is not None:
                try:
                    demonstrations = await self.demonstrator.demonstrate(turn, hint.hint)
                except Exception as exc:  # the turn's own sample does not depend on its demonstrations
                    demonstration_error = f"{type(exc).__name__}: {exc}"
                    log.warning("teacher demonstration failed for turn %s: %s", turn.id, demonstration_error)
        teacher_dropped = None
        if signals.teacher is not None and self._teacher_answers_worse(turn, demonstrations):
            teacher_dropped = "the hinted teacher's replies do not answer the request; the policy's does"
            signals = TurnSignals(reward=reward, hint=hint)
            self.teacher.stats["dropped"] = self.teacher.stats.get("dropped", 0) + 1
        judgement = self._judgement(signals)
        if self.demonstrator is not None:
            judgement["extras"].update(demonstrations=len(demonstrations), demonstration_error=demonstration_error,
                                       teacher_dropped=teacher_dropped)
        turn.judgement = judgement
        decision = self._decide(turn, signals)
        teacher = signals.teacher if decision.trainable and decision.use_teacher else None
        return Outcome(judgement, decision, teacher, demonstrations)

    def _teacher_answers_worse(self, turn, demonstrations) -> bool:
        checked = getattr(demonstrations, "checked", 0)
        if not checked or demonstrations.answering:
            return False
        request = user_requests_text((turn.request or {}).get("messages") or [])
        return check_answer(message_text(turn.response_message), request).ok

    def _decide(self, turn, signals: TurnSignals) -> Decision:
        if not turn.next_state:
            return Decision(False, reason="no_next_state")
        if not turn.response_ids:
            return Decision(False, reason="empty_response")
        decision = self.method.decide(turn, signals)
        if not isinstance(decision, Decision):
            raise TypeError(f"method {self.name!r}: decide() returned {type(decision).__name__}, not a Decision")
        return decision

    def _judgement(self, signals: TurnSignals) -> dict:
        """What is stored with the turn: the reward judge's own record when hints play no part; with hints,
        one merged record (score, every vote of both judges, the hint under extras)."""
        reward, hint = signals.reward, signals.hint
        if hint is None:
            return reward.to_dict()
        return {
            "score": signals.score,
            "votes": [asdict(v) for v in (reward.votes if reward is not None else [])]
                     + [asdict(v) | {"source": f"hint:{v.source}"} for v in hint.votes],
            "judge": f"{self.name}:{getattr(self.hint_judge, 'name', 'hint')}"
                     + (f"+{self.judge.name}" if self.judge is not None else ""),
            "rationale": (reward.rationale if reward is not None else "") or hint.hint,
            "failed": bool(hint.failed and (reward is None or reward.failed)),
            "extras": {"hint": hint.to_dict(), "teacher_error": signals.teacher_error,
                       "prm": reward.to_dict() if reward is not None else None},
        }

    async def aclose(self) -> None:
        for part in (self.judge, self.hint_judge, self.teacher, self.demonstrator):
            if part is not None:
                await part.aclose()
