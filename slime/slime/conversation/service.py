"""Session and turn bookkeeping behind the proxy: next states, judging, samples, idle sessions.

Every main-line turn ends in exactly one of: a sample (judged, trainable), or an explicit exclusion
with a reason (no next state, neutral, judge failed, superseded by a retry, aborted by the client).
The store is the source of truth; this object only caches, per active session, the fingerprints of
the turns still waiting for their next state, so memory stays flat however many sessions there are.
All store calls run in worker threads: SQLite commits never stall the event loop that streams tokens.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from slime.conversation import sessions
from slime.conversation.header_check import HeaderCheck
from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.methods import Decision, Outcome, TurnEvaluator, load_method
from slime.conversation.samples import sample_from_turn
from slime.conversation.store import ConversationStore

log = logging.getLogger("slime.conversation")

AWAITING = "awaiting_next_state"


class OpenTurn:
    """A main-line turn waiting for its next state. Its row id arrives once the store has written it:
    the turn is matchable as soon as the response is out, and every store update about it waits for the id."""

    def __init__(self, fingerprints: list[str], turn_id: int | None = None):
        self.fingerprints = fingerprints  # prompt history + response
        self.stored: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if turn_id is not None:
            self.stored.set_result(turn_id)

    async def turn_id(self) -> int:
        return await self.stored


@dataclass
class ServiceStats:
    judged: int = 0
    judge_failures: int = 0
    judge_timeouts: int = 0
    judging: int = 0
    samples: int = 0
    demonstrations: int = 0  # teacher-written samples (also counted in samples)
    excluded: int = 0
    unclassified_sessions: int = 0
    traces: int = 0  # traces ingested through POST /v1/traces (duplicates not counted)


class FeedbackError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ConversationService:
    def __init__(self, store: ConversationStore, method, *, judge_timeout: float = 300.0,
                 judge_concurrency: int = 4, session_idle_ttl: float = 1800.0, max_cached_sessions: int = 4096,
                 max_open_turns: int = 32):
        """`method`: a `methods.TurnEvaluator` (or a bare `Judge`, meaning Binary RL with that judge)."""
        if not hasattr(method, "evaluate"):
            method = TurnEvaluator(load_method("rl"), judge=method)
        self.store = store
        self.method = method
        self.judge_timeout = judge_timeout
        self.judge_slots = asyncio.Semaphore(judge_concurrency)
        self.session_idle_ttl = session_idle_ttl
        self.max_cached_sessions = max_cached_sessions
        self.max_open_turns = max_open_turns
        self.open: OrderedDict[str, list[OpenTurn]] = OrderedDict()  # session -> turns awaiting a next state
        self.session_locks: dict[str, asyncio.Lock] = {}
        self.unclassified_logged: OrderedDict[str, None] = OrderedDict()
        # requests being served per session, and when each session last did anything: a session with a
        # request in flight is not idle, however long the engine takes
        self.inflight: dict[str, int] = {}
        self.last_activity: dict[str, float] = {}
        self.tasks: set[asyncio.Task] = set()  # judging: cancelled at shutdown, resumed from the store
        # Turns to judge wait here as ids, and a fixed set of workers loads and judges them: when turns arrive
        # faster than they are judged (GPU rates), the backlog costs a few bytes per turn, not a loaded turn
        # and a coroutine each (the store's 'judging' status is the durable copy of this queue).
        self.judge_queue: asyncio.Queue[tuple[int, Judgement | None]] = asyncio.Queue()
        self.judge_workers = 2 * judge_concurrency  # store reads/writes of one overlap another's evaluation
        self.writes: set[asyncio.Task] = set()  # store writes: always finished before shutdown
        self.stats = ServiceStats()
        self.header_check = HeaderCheck()  # tagged requests: does inference agree with the client's tags?
        self._sweeper: asyncio.Task | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Resume judging that a crash interrupted, and start the idle-session sweeper."""
        for _ in range(self.judge_workers):
            self._spawn(self._judge_forever())
        pending = await asyncio.to_thread(self.store.turns_to_judge)
        for turn in pending:
            self._schedule_judge(turn.id)
        if pending:
            log.info("resuming judgement of %d turn(s) left from a previous run", len(pending))
        self._sweeper = asyncio.create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._sweeper:
            self._sweeper.cancel()
        while self.writes:
            await asyncio.gather(*list(self.writes), return_exceptions=True)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.method.aclose()

    async def settle_writes(self) -> None:
        """Wait for the store writes already under way (a turn answered a moment ago may still be on its way)."""
        if self.writes:
            await asyncio.gather(*list(self.writes), return_exceptions=True)

    def _spawn(self, coro, write: bool = False) -> asyncio.Task:
        task = asyncio.create_task(coro)
        group = self.writes if write else self.tasks
        group.add(task)
        task.add_done_callback(group.discard)
        task.add_done_callback(_log_failure)
        return task

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self.session_locks.get(session_id)
        if lock is None:
            lock = self.session_locks[session_id] = asyncio.Lock()
        return lock

    # --- request lifetime ---------------------------------------------------------------------------
    def begin_request(self, session_id: str) -> None:
        self.inflight[session_id] = self.inflight.get(session_id, 0) + 1
        self.last_activity[session_id] = time.time()

    def end_request(self, session_id: str) -> None:
        left = self.inflight.get(session_id, 1) - 1
        if left > 0:
            self.inflight[session_id] = left
        else:
            self.inflight.pop(session_id, None)
        self.last_activity[session_id] = time.time()

    def _is_idle(self, session_id: str) -> bool:
        if self.inflight.get(session_id):
            return False
        return time.time() - self.last_activity.get(session_id, 0.0) >= self.session_idle_ttl

    # --- before forwarding: attach the next state of an earlier turn ----------------------------
    async def before_forward(self, meta: sessions.RequestMeta, messages: list[dict]) -> None:
        disagreement = self.header_check.observe(meta)
        if disagreement is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("session %s: the client's tags and inference disagree on %s: header %s, inferred %s",
                      meta.session_id, " and ".join(disagreement["disagree"]), disagreement["header"],
                      disagreement["inferred"])
        if meta.turn_reason == "unclassified" and meta.session_id not in self.unclassified_logged:
            self.unclassified_logged[meta.session_id] = None
            if len(self.unclassified_logged) > self.max_cached_sessions:
                self.unclassified_logged.popitem(last=False)
            self.stats.unclassified_sessions += 1
            log.info("session %s: request shape not recognised, treated as main-line", meta.session_id)
        if meta.turn_type != "main":
            return
        async with self._lock(meta.session_id):
            open_turns = await self._open_turns(meta.session_id)
            attached = None
            for turn in sorted(open_turns, key=lambda t: len(t.fingerprints), reverse=True):
                next_state = sessions.next_state_after(turn.fingerprints, messages)
                if next_state:
                    attached = turn
                    # stored and judged in the background: the request goes on to the engine right away
                    self._spawn(self._attach_and_judge(turn, next_state), write=True)
                    break
            remaining = [t for t in open_turns if t is not attached]
            retried = []
            for turn in list(remaining):
                if sessions.is_retry(turn.fingerprints[:-1], messages):
                    # the client asked the same thing again: that response will never be continued
                    remaining.remove(turn)
                    retried.append(turn)
                    self._spawn(self._exclude(turn, "superseded_by_retry"), write=True)
            if log.isEnabledFor(logging.DEBUG):
                if attached is not None:
                    matched = (f"continues {_turn_label(attached)}: its {len(next_state)} new message(s) are that "
                               "turn's next state, to be judged")
                else:
                    matched = f"continues none of its {len(open_turns)} open turn(s) (a new turn)"
                retries = "".join(f"; retry of {_turn_label(t)}: that one is excluded" for t in retried)
                log.debug("session %s: main-line request %s%s", meta.session_id, matched, retries)
            self.open[meta.session_id] = remaining
            self.open.move_to_end(meta.session_id)

    async def _open_turns(self, session_id: str) -> list[OpenTurn]:
        cached = self.open.get(session_id)
        if cached is not None:
            return cached
        rows = await asyncio.to_thread(self.store.open_turns, session_id)
        turns = [OpenTurn(list(r.fingerprints), r.id) for r in rows]
        self.open[session_id] = turns
        while len(self.open) > self.max_cached_sessions:
            self.open.popitem(last=False)  # evicted sessions reload from the store on their next request
        return turns

    # --- after the response: store the turn ------------------------------------------------------
    async def record_turn(self, meta: sessions.RequestMeta, request: dict, sampled, *, aborted: bool = False) -> None:
        """Keep one served request. The turn can be matched by the session's next request at once; the row
        is written in the background, so the client's response never waits for the disk."""
        messages = request.get("messages") or []
        response = sampled.message()
        main = meta.turn_type == "main"
        status = "aborted" if aborted else ("awaiting_next_state" if main else "side")
        fingerprints = sessions.turn_fingerprints(messages, response) if main else []
        turn = OpenTurn(fingerprints)
        if status == AWAITING:
            async with self._lock(meta.session_id):
                turns = await self._open_turns(meta.session_id)
                turns.append(turn)
                overflow = turns[:-self.max_open_turns] if len(turns) > self.max_open_turns else []
                del turns[:len(overflow)]
            for oldest in overflow:
                self._spawn(self._exclude(oldest, "no_next_state"), write=True)
        elif aborted:
            self.stats.excluded += 1
        self._spawn(self._persist(turn, meta, request, response, sampled, status, fingerprints), write=True)
        if meta.session_done:
            await self.finalize_session(meta.session_id, "session_done")

    async def _persist(self, turn: OpenTurn, meta, request, response, sampled, status, fingerprints) -> None:
        try:
            row = await asyncio.to_thread(
                self.store.add_turn, session_id=meta.session_id, turn_type=meta.turn_type,
                turn_reason=meta.turn_reason, request=request, response_message=response,
                prompt_ids=sampled.prompt_ids, response_ids=sampled.response_ids,
                response_logprobs=sampled.response_logprobs, weight_version=sampled.weight_version,
                finish_reason=sampled.finish_reason, trace_id=meta.trace_id, fingerprints=fingerprints,
                status=status, session_source=meta.session_source)
        except BaseException as exc:
            turn.stored.set_exception(exc)
            raise
        turn.stored.set_result(row.id)

    # --- judging ----------------------------------------------------------------------------------
    def _schedule_judge(self, turn_id: int, verdict: Judgement | None = None) -> None:
        self.judge_queue.put_nowait((turn_id, verdict))

    async def _judge_forever(self) -> None:
        while True:
            turn_id, verdict = await self.judge_queue.get()
            try:
                await self._judge_turn(turn_id, verdict)
            except Exception:  # noqa: BLE001 - one turn's failure must not stop the worker; it stays 'judging'
                log.exception("judging turn %d failed", turn_id)

    async def _attach_and_judge(self, turn: OpenTurn, next_state: list[dict]) -> None:
        turn_id = await turn.turn_id()
        await asyncio.to_thread(self.store.set_next_state, turn_id, next_state, "request")
        self._schedule_judge(turn_id)

    async def _judge_turn(self, turn_id: int, verdict: Judgement | None = None) -> None:
        turn = await asyncio.to_thread(self.store.get_turn, turn_id)
        if turn is None or not turn.next_state:
            return
        outcome = await self._evaluate(turn, verdict)
        for demonstration in outcome.demonstrations:
            # stored before the turn's own judgement: whoever sees the turn judged also sees its demonstrations
            await asyncio.to_thread(self._store_demonstration, turn, demonstration)
        turn.judgement = outcome.judgement
        await asyncio.to_thread(self.store.set_judgement, turn_id, turn.judgement)
        self.stats.judged += 1
        decision = outcome.decision
        if log.isEnabledFor(logging.DEBUG):
            j = outcome.judgement or {}
            hint = (j.get("extras") or {}).get("hint")
            log.debug("session %s turn %d (id %d): judge %s score %s%s votes %s%s; method %s: %s%s",
                      turn.session_id, turn.turn_num, turn_id, j.get("judge"), j.get("score"),
                      " (failed)" if j.get("failed") else "", _describe_votes(j),
                      f", hint {str(hint)[:80]!r}" if hint else "", self.method.name,
                      f"sample with reward {decision.reward:+g}" if decision.trainable
                      else f"excluded ({decision.reason})",
                      f", {len(outcome.demonstrations)} teacher demonstration(s)" if outcome.demonstrations else "")
        if decision.trainable:
            sample = sample_from_turn(turn, decision.reward, outcome.teacher, self.method.name)
            try:
                await asyncio.to_thread(self.store.add_sample, turn_id, sample.to_dict(), decision.reward)
            except ValueError as exc:  # claimed for training meanwhile (late feedback): the trained one stands
                log.info("turn %d: %s; keeping the sample already in a batch", turn_id, exc)
                return
            self.stats.samples += 1
        else:
            await self._exclude(turn_id, decision.reason)

    def _store_demonstration(self, turn, demonstration) -> int:
        """A teacher-written reply becomes a turn of type "demonstration" in the turn's session (the student's
        request and prompt ids, the teacher's reply ids) with a pending sample. Returns its row id."""
        row = self.store.add_turn(
            session_id=turn.session_id, turn_type="demonstration", turn_reason=f"teacher_for_turn:{turn.id}",
            request=turn.request, response_message={"role": "assistant", "content": demonstration.text},
            prompt_ids=turn.prompt_ids, response_ids=demonstration.response_ids,
            response_logprobs=demonstration.student_log_probs, weight_version=demonstration.weight_version,
            finish_reason=demonstration.finish_reason, trace_id=turn.trace_id, fingerprints=[], status="judged")
        row.judgement = {"score": 0.0, "votes": [], "judge": "demonstration", "rationale": demonstration.hint,
                         "failed": False, "extras": {"demonstration_of": turn.id, "hint": demonstration.hint}}
        self.store.set_judgement(row.id, row.judgement)
        sample = sample_from_turn(row, 0.0, demonstration.teacher, self.method.name)
        self.store.add_sample(row.id, sample.to_dict(), 0.0)
        self.stats.demonstrations += 1
        self.stats.samples += 1
        return row.id

    async def _evaluate(self, turn, verdict: Judgement | None) -> Outcome:
        view = TurnForJudge(session_id=turn.session_id, turn_num=turn.turn_num,
                            prompt_messages=turn.request.get("messages") or [],
                            response_message=turn.response_message, next_state=turn.next_state)
        self.stats.judging += 1
        started = time.perf_counter()
        try:
            async with self.judge_slots:
                return await asyncio.wait_for(self.method.evaluate(turn, view, verdict), timeout=self.judge_timeout)
        except asyncio.TimeoutError:
            self.stats.judge_timeouts += 1
            error = f"timeout after {self.judge_timeout:.0f} s"
        except Exception as exc:  # a broken plugin must not lose the turn: it is recorded as a failure
            log.exception("method %s failed on turn %d", self.method.name, turn.id)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self.stats.judging -= 1
        self.stats.judge_failures += 1
        vote = Vote(score=None, rationale="", source=self.method.name, error=error,
                    seconds=time.perf_counter() - started)
        failed = Judgement(score=0.0, votes=[vote], judge=self.method.name, failed=True)
        return Outcome(failed.to_dict(), Decision(False, reason="judge_failed"))

    async def _exclude(self, turn: "int | OpenTurn", reason: str) -> None:
        turn_id = await turn.turn_id() if isinstance(turn, OpenTurn) else turn
        await asyncio.to_thread(self.store.set_status, turn_id, "excluded", reason)
        self.stats.excluded += 1
        log.debug("turn id %d excluded: %s", turn_id, reason)

    # --- sessions ----------------------------------------------------------------------------------
    async def finalize_session(self, session_id: str, reason: str) -> bool:
        """Session over (explicit done, or idle past the TTL): turns still waiting can never be judged.
        True when a session was finalized: False for an idle one that spoke again meanwhile, or an id the store
        never saw."""
        async with self._lock(session_id):
            if reason == "idle" and not self._is_idle(session_id):
                return False  # it spoke again while we waited for its lock
            turns = self.open.pop(session_id, None)
            if turns is None:
                turns = [OpenTurn([], r.id) for r in await asyncio.to_thread(self.store.open_turns, session_id)]
            for turn in turns:
                await self._exclude(turn, "no_next_state")
            known = await asyncio.to_thread(self.store.finalize_session, session_id, reason)
        if not self.inflight.get(session_id):
            self.session_locks.pop(session_id, None)
            self.last_activity.pop(session_id, None)
        return known

    async def sweep_idle(self, now: float | None = None) -> int:
        idle = await asyncio.to_thread(self.store.idle_sessions, self.session_idle_ttl, now)
        finished = 0
        for session_id in idle:
            finished += await self.finalize_session(session_id, "idle")
        return finished

    async def _sweep_forever(self) -> None:
        interval = max(1.0, min(60.0, self.session_idle_ttl / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                finished = await self.sweep_idle()
                if finished:
                    log.info("finalised %d idle session(s)", finished)
            except Exception:
                log.exception("idle-session sweep failed; retrying in %.0f s", interval)

    # --- traces another app's model wrote (POST /v1/traces) --------------------------------------------
    async def ingest_traces(self, items: list[tuple]) -> list[dict]:
        """Store traces (`traces.Trace`, prompt ids, response ids) as main-line turns, once per trace id.

        A trace is judged at once when it says what followed or carries an explicit reward; otherwise it waits,
        like a proxied turn, for a later trace of its session or for operator feedback. Traces of a session the
        app named go through the session machinery one by one (one may be the next state of another); traces
        in a session of their own (no `session_id`) are written in one transaction per batch."""
        existing = await asyncio.to_thread(self.store.trace_turns, [t.trace_id for t, _, _ in items])
        results: list[dict | None] = [None] * len(items)
        solo = []
        for i, (trace, prompt_ids, response_ids) in enumerate(items):
            if trace.trace_id in existing:
                results[i] = _trace_result(trace.trace_id, existing[trace.trace_id], duplicate=True)
            elif trace.session_id == f"trace:{trace.trace_id}":
                solo.append(i)
            else:
                results[i] = await self._ingest_in_session(trace, prompt_ids, response_ids)
        if solo:
            plans = [self._trace_plan(*items[i]) for i in solo]
            rows = await asyncio.to_thread(self.store.add_traces, [item for item, _ in plans])
            for i, (item, verdict), (row, created) in zip(solo, plans, rows):
                results[i] = self._trace_stored(items[i][0], row, created, verdict, item["next_state"])
        return results

    def _trace_plan(self, trace, prompt_ids: list[int], response_ids: list[int]) -> tuple[dict, Judgement | None]:
        """The store item of a trace, and the verdict its explicit reward gives (None: the judges decide)."""
        verdict = None
        if trace.reward is not None:  # the app's own verdict outranks any judge's reading
            sign = (trace.reward > 0) - (trace.reward < 0)
            verdict = Judgement(score=trace.reward, votes=[Vote(score=sign, rationale=trace.note or "", source="trace")],
                                judge="trace", rationale=trace.note or "")
        next_state = list(trace.next_messages)
        if not next_state and trace.note:
            next_state = [{"role": "user", "content": trace.note}]
        if not next_state and verdict is not None:
            next_state = [{"role": "user", "content": feedback_text(verdict.votes[0].score, None)}]
        item = {"trace_id": trace.trace_id, "meta": trace.meta(), "session_id": trace.session_id,
                "request": trace.request, "response_message": trace.response, "prompt_ids": prompt_ids,
                "response_ids": response_ids, "fingerprints": sessions.turn_fingerprints(trace.messages, trace.response),
                "status": "judging" if next_state else AWAITING, "next_state": next_state}
        return item, verdict

    def _trace_stored(self, trace, row, created: bool, verdict, next_state) -> dict:
        if not created:  # the same trace id arrived twice at once: the first one stands
            return _trace_result(trace.trace_id, row, duplicate=True)
        self.stats.traces += 1
        self.last_activity[trace.session_id] = time.time()
        if next_state:
            self._schedule_judge(row.id, verdict)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("trace %s -> session %s turn %d (%s)", trace.trace_id, trace.session_id, row.turn_num,
                      "judging" if next_state else "waiting for what follows")
        return _trace_result(trace.trace_id, row, duplicate=False)

    async def _ingest_in_session(self, trace, prompt_ids: list[int], response_ids: list[int]) -> dict:
        meta = sessions.RequestMeta(session_id=trace.session_id, session_source="trace", turn_type="main",
                                    turn_reason="trace", explicit_turn_type=True, session_done=False, trace_id=None)
        await self.before_forward(meta, trace.messages)  # it may be the next state of an earlier trace
        item, verdict = self._trace_plan(trace, prompt_ids, response_ids)
        async with self._lock(trace.session_id):
            open_turns = await self._open_turns(trace.session_id)
            [(row, created)] = await asyncio.to_thread(self.store.add_traces, [item])
            if created and not item["next_state"]:
                open_turns.append(OpenTurn(item["fingerprints"], row.id))
        return self._trace_stored(trace, row, created, verdict, item["next_state"])

    async def trace_feedback(self, trace_id: str, polarity: int | None, text: str | None) -> dict:
        """An operator's verdict on a trace, in words and/or a polarity: the trace's next state, judged again."""
        turn = await asyncio.to_thread(self.store.trace_turn, trace_id)
        if turn is None:
            raise FeedbackError(404, f"no trace with id {trace_id!r}")
        result = await self.feedback(turn.session_id, turn.turn_num, polarity, text)
        return {"trace_id": trace_id, **result}

    # --- explicit feedback ---------------------------------------------------------------------------
    async def feedback(self, session_id: str, turn_num: int | None, rating: int | None, text: str | None) -> dict:
        """A rating and/or a comment about one turn; it becomes (part of) that turn's next state."""
        await self.settle_writes()
        async with self._lock(session_id):
            turn = await asyncio.to_thread(self.store.find_turn, session_id, turn_num)
            if turn is None:
                raise FeedbackError(404, f"no main-line turn {turn_num if turn_num else '(latest)'} in session "
                                         f"{session_id!r}")
            if turn.status in ("sampled",) and not await asyncio.to_thread(self.store.sample_is_pending, turn.id):
                raise FeedbackError(409, f"turn {turn.turn_num} of session {session_id!r} is already in a training "
                                         "batch; feedback can no longer change it")
            if turn.turn_type == "demonstration":
                raise FeedbackError(409, f"turn {turn.turn_num} of session {session_id!r} is a teacher demonstration, "
                                         "not a reply the user saw")
            if turn.status == "aborted":
                raise FeedbackError(409, f"turn {turn.turn_num} was aborted by the client and is not trained")
            message = {"role": "user", "content": feedback_text(rating, text)}
            await asyncio.to_thread(self.store.add_feedback, session_id, turn.id, rating, text)
            if turn.next_state:
                await asyncio.to_thread(self.store.append_next_state, turn.id, [message], "request+feedback")
            else:
                await asyncio.to_thread(self.store.set_next_state, turn.id, [message], "feedback")
            cached = self.open.get(session_id)
            if cached is not None:
                self.open[session_id] = [t for t in cached if not (t.stored.done() and not t.stored.exception()
                                                                   and t.stored.result() == turn.id)]
        judgement = None
        if rating is not None and rating != 0:
            # the user's own verdict outranks any judge's reading of it
            vote = Vote(score=int(rating), rationale=text or "", source="feedback")
            judgement = Judgement(score=float(rating), votes=[vote], judge="feedback", rationale=text or "")
        await self._judge_turn(turn.id, judgement)
        judged = await asyncio.to_thread(self.store.get_turn, turn.id)
        return {"session_id": session_id, "turn": judged.turn_num, "status": judged.status,
                "score": (judged.judgement or {}).get("score"), "exclusion_reason": judged.exclusion_reason}

    def snapshot(self) -> dict:
        s = self.stats
        return {"judged": s.judged, "judge_failures": s.judge_failures, "judge_timeouts": s.judge_timeouts,
                "judging_now": s.judging, "samples_emitted": s.samples, "demonstrations": s.demonstrations, "excluded": s.excluded,
                "unclassified_sessions": s.unclassified_sessions, "traces_ingested": s.traces, "cached_sessions": len(self.open),
                "header_check": self.header_check.snapshot(), "background_tasks": len(self.tasks), "judge_queue": self.judge_queue.qsize(), "method": self.method.name,
                "judge": getattr(getattr(self.method, "judge", None), "name", None),
                "judge_stats": dict(getattr(getattr(self.method, "judge", None), "stats", {}) or {}),
                "hint_judge_stats": dict(getattr(getattr(self.method, "hint_judge", None), "stats", {}) or {}),
                "teacher_stats": dict(getattr(getattr(self.method, "teacher", None), "stats", {}) or {}),
                "demonstration_stats": dict(getattr(getattr(self.method, "demonstrator", None), "stats", {}) or {})}


def _trace_result(trace_id: str, turn, duplicate: bool) -> dict:
    return {"trace_id": trace_id, "session_id": turn.session_id, "turn": turn.turn_num, "turn_id": turn.id,
            "status": turn.status, "duplicate": duplicate}


def feedback_text(rating: int | None, text: str | None) -> str:
    if text and text.strip():
        return text.strip()
    return {1: "👍 That was good.", -1: "👎 That was not what I wanted."}.get(rating or 0, "(no comment)")


def _turn_label(turn: OpenTurn) -> str:
    """"turn id N" once the store has written it (for the DEBUG log)."""
    if turn.stored.done() and not turn.stored.cancelled() and turn.stored.exception() is None:
        return f"turn id {turn.stored.result()}"
    return "the turn still being written"


def _describe_votes(judgement: dict) -> str:
    """A judgement's votes in brief: "[llm +1, llm failed (timeout)]"."""
    votes = []
    for vote in judgement.get("votes") or []:
        score = vote.get("score") if isinstance(vote, dict) else None
        if score is None:
            text = f"failed ({vote.get('error') if isinstance(vote, dict) else vote!r})"
        else:
            text = f"{score:+g}" if isinstance(score, (int, float)) else repr(score)
        votes.append(f"{vote.get('source') if isinstance(vote, dict) else '?'} {text}")
    return "[" + ", ".join(votes) + "]"


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("background task failed: %r", task.exception(), exc_info=task.exception())
