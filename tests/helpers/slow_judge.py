"""A judge plugin (loaded by the proxy through `--judge helpers.slow_judge:slow_judge`) that takes its time.

It agrees with every turn after `SLOW_JUDGE_SECONDS` (default 30) seconds: a real plugin on the real
plugin path, used to show that judging never delays serving and that judge timeouts are recorded.
"""

from __future__ import annotations

import asyncio
import os

from slime.conversation.judges.base import Judgement, Vote


class SlowJudge:
    name = "slow"

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.stats = {"calls": 0}

    async def judge(self, turn) -> Judgement:
        self.stats["calls"] += 1
        await asyncio.sleep(self.seconds)
        return Judgement(score=1.0, votes=[Vote(score=1, rationale="slow yes", source="slow")], judge="slow")

    async def aclose(self) -> None:
        return None


def slow_judge(**options) -> SlowJudge:
    return SlowJudge(float(os.environ.get("SLOW_JUDGE_SECONDS", "30")))
