"""Turns that arrive faster than the judge keeps up wait as ids in a queue with a fixed set of workers, not as one
loaded turn and one task each: at GPU rates the backlog grew by the whole turn per request (RSS +600 MiB in 80 s
under bench/proxy_capacity.py --soak). The real store and service; the judge is held until the test lets it go."""

from __future__ import annotations

import asyncio

from slime.conversation.judges.base import Judgement, Vote
from slime.conversation.relay import SampledTurn
from slime.conversation.service import ConversationService
from slime.conversation.sessions import RequestMeta
from slime.conversation.store import ConversationStore

TURNS = 60


class GatedJudge:
    name = "gated"

    def __init__(self):
        self.gate = asyncio.Event()
        self.calls = 0

    async def judge(self, turn) -> Judgement:
        await self.gate.wait()
        self.calls += 1
        return Judgement(score=1.0, votes=[Vote(score=1, rationale="yes", source="gated")], judge="gated")

    async def aclose(self) -> None:
        return None


def _meta(session: str) -> RequestMeta:
    return RequestMeta(session_id=session, session_source="header", turn_type="main", turn_reason="header",
                       explicit_turn_type=True, session_done=False, trace_id=None)


async def _run(db) -> None:
    store = ConversationStore(db)
    judge = GatedJudge()
    service = ConversationService(store, judge, judge_concurrency=2)
    await service.start()
    try:
        for i in range(TURNS):
            prompt = [{"role": "user", "content": f"question {i}"}]
            sampled = SampledTurn(prompt_ids=[1, 2, i], response_ids=[7, i], response_logprobs=[-0.5, -0.25],
                                  finish_reason="stop", complete=True)
            sampled.content = f"answer {i}"
            await service.record_turn(_meta(f"s{i}"), {"messages": prompt}, sampled)
            # the session's next request carries the turn's next state: the turn goes to the judge
            await service.before_forward(_meta(f"s{i}"), prompt + [{"role": "assistant", "content": f"answer {i}"},
                                                                   {"role": "user", "content": "thanks"}])
        await service.settle_writes()
        for _ in range(200):  # the workers take the first turns off the queue and wait at the judge
            if service.judge_queue.qsize() == TURNS - service.judge_workers:
                break
            await asyncio.sleep(0.01)
        # the backlog is ids in the queue; the number of tasks does not grow with it
        assert service.judge_queue.qsize() == TURNS - service.judge_workers
        assert len(service.tasks) == service.judge_workers
        assert store.stats()["turns"]["by_status"].get("judging") == TURNS  # durable while waiting
        judge.gate.set()
        for _ in range(1000):
            if store.stats()["turns"]["by_status"].get("sampled") == TURNS:
                break
            await asyncio.sleep(0.01)
        assert judge.calls == TURNS
        assert store.stats()["turns"]["by_status"] == {"sampled": TURNS}
        assert service.judge_queue.qsize() == 0 and len(service.tasks) == service.judge_workers
    finally:
        await service.stop()
        store.close()


def test_judge_backlog_is_a_queue_of_ids_with_fixed_workers(tmp_path):
    asyncio.run(_run(tmp_path / "backlog.db"))
