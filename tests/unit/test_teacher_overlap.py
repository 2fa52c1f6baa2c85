"""`--hint-select overlap`: among candidate hints, the one whose teacher stays closest to the student's own
log-probs on the tokens it sampled."""

import asyncio
from types import SimpleNamespace

from slime.conversation.judges.hints import choose
from slime.conversation.methods import TeacherScorer
from slime.conversation.teacher import TeacherScores


class FixedTeacher(TeacherScorer):
    """The real scorer's overlap arithmetic over given teacher log-probs per hint (no engine call)."""

    def __init__(self, by_hint):
        self.by_hint = by_hint

    async def score(self, turn, hint):
        return TeacherScores(log_probs=self.by_hint[hint], topk_log_probs=None, topk_indices=None, prompt_len=0)


def test_overlap_prefers_the_hint_closest_to_the_student():
    turn = SimpleNamespace(response_logprobs=[-1.0, -2.0, -0.5])
    teacher = FixedTeacher({"be brief": [-1.1, -2.2, -0.4], "write a poem about it": [-6.0, -0.1, -3.0]})
    assert abs(asyncio.run(teacher.overlap(turn, "be brief")) + (0.1 + 0.2 + 0.1) / 3) < 1e-12
    index, scores = asyncio.run(choose(["write a poem about it", "be brief"], lambda h: teacher.overlap(turn, h)))
    assert index == 1 and scores[1] > scores[0]
