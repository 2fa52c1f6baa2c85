"""Does a reply still answer the request: labelled replies to a word problem and to a plain request, the
demonstrator keeping only answering replies, and the evaluator dropping the teacher term of a turn whose
teacher answers worse than the policy."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from slime.conversation.answer_check import check_answer
from slime.conversation.demonstrations import Demonstration, Demonstrations, TeacherDemonstrator
from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.judges.hints import HintResult
from openclaw_combine_method import Combine
from openclaw_opd_method import OnPolicyDistillation
from slime.conversation.methods import Decision, TurnEvaluator
from slime.conversation.teacher import TeacherScores

BUS = ("A bus leaves the station with 30 people on it. At the first stop 5 people get off and 7 people get on. "
       "How many people are on the bus now?")
SEA = "Tell me about the sea and why it is salty."

LABELLED = [
    # (reply, request, ok, reason)
    ("Sure!", BUS, False, "opening only"),
    ("Of course!\n\n", BUS, False, "opening only"),
    ("Sure! Here's the step-by-step explanation:", BUS, False, "opening only"),
    ("Sure! 1. First", BUS, False, "opening only"),  # a list marker is not a result
    ("Sure! Step 1:", BUS, False, "opening only"),  # nor is a step label
    ("Hello there! I'm here to help you with your homework. What's your question? Step 1:", BUS, False, "off topic"),
    ("Sure, I can help with that one, just give me a moment please\nOk.", SEA, False, "off topic"),
    ("Hello there! I'm here to help you with your math homework. What's your question?", BUS, False, "off topic"),
    ("Ahoy matey! Let's sail the seas of numbers together, arr! Adventure awaits us all today.", BUS, False,
     "off topic"),
    ("", BUS, False, "empty"),
    ("   ", BUS, False, "empty"),
    ("Sure! Start with 30 people. 5 get off, so 25 remain, then 7 get on: 32 people.", BUS, True, ""),
    ("To find how many people are on the bus, we subtract those who got off and add those who got on.", BUS, True,
     ""),
    ("The answer is 32.", BUS, True, ""),  # terse, but it states a result
    ("32", BUS, True, ""),
    ("1. 30 - 5 = 25\n2. 25 + 7 = 32", BUS, True, ""),
    ("Hi! There are 32 people on the bus now because 30 - 5 + 7 = 32.", BUS, True, ""),
    ("Sure! The sea is salty because rivers carry dissolved minerals into it, and evaporation leaves the salt "
     "behind.", SEA, True, ""),
    ("Sure! I'd love to help you with anything you need today, just let me know what it is.", SEA, False,
     "off topic"),
]


@pytest.mark.parametrize("reply, asked, ok, reason", LABELLED, ids=[f"{i}" for i in range(len(LABELLED))])
def test_labelled_replies(reply, asked, ok, reason):
    check = check_answer(reply, asked)
    assert (check.ok, check.reason) == (ok, reason), check


def test_the_check_reports_what_it_found():
    check = check_answer("Sure! Start with 30 people. 5 get off, so 25 remain, then 7 get on: 32 people.", BUS)
    assert check.shared_numbers == ("30", "5", "7") and check.results == ("25", "32")
    assert "people" in check.shared_words and check.body_words >= 8
    # thresholds are parameters
    assert not check_answer("Sure! It is salty because of minerals.", SEA, min_body_words=8).ok
    assert check_answer("Sure! It is salty because of minerals.", SEA, min_body_words=4, min_shared_words=1).ok


def _demo(text: str) -> Demonstration:
    return Demonstration(response_ids=[1, 2], text=text, finish_reason="stop", student_log_probs=[-1.0, -1.0],
                         teacher=TeacherScores([-0.5, -0.5], None, None, 3), weight_version="1", hint="h")


def _turn(reply: str, messages=None):
    messages = messages or [{"role": "user", "content": BUS}]
    return SimpleNamespace(id=7, session_id="s", turn_num=1, prompt_ids=[1], response_ids=[5, 6],
                           response_logprobs=[-1.0, -1.0], judgement=None, request={"messages": messages},
                           response_message={"role": "assistant", "content": reply},
                           next_state=[{"role": "user", "content": "start with Sure!"}])


def test_the_demonstrator_keeps_only_answering_replies_and_counts_the_rest():
    demonstrator = TeacherDemonstrator(None, None, None, count=1, temperature=0.6, max_new_tokens=8,
                                       check_answers=True)
    kept = demonstrator._answering(_turn("x"), [_demo("Sure!"), _demo("Sure! 30 - 5 + 7 = 32 people."),
                                                _demo("Hello! What's your question?")])
    assert [d.text for d in kept] == ["Sure! 30 - 5 + 7 = 32 people."]
    assert demonstrator.stats["unanswering"] == 2
    # a retry turn: the request is every user message, so the original problem still counts as the topic
    retry = _turn("x", [{"role": "user", "content": BUS}, {"role": "assistant", "content": "25"},
                        {"role": "user", "content": "start with Sure! please"}])
    assert len(demonstrator._answering(retry, [_demo("Sure! 30 people, 5 off, 7 on: 32.")])) == 1


class _Parts:
    """The evaluator's collaborators for one hinted turn, each returning what the test sets."""

    name = "parts"

    def __init__(self, demonstrations):
        self.demonstrations = demonstrations
        self.stats = {}

    async def judge(self, turn):
        return Judgement(score=-1.0, votes=[Vote(score=-1, rationale="r", source="rules")], judge="rules")

    async def hint(self, turn):
        return HintResult(accepted=True, hint='Start with "Sure!".', votes=[], judge="rules")

    async def score(self, turn, hint):
        return TeacherScores([-0.5, -0.5], None, None, 3)

    async def demonstrate(self, turn, hint):
        return self.demonstrations

    async def aclose(self):
        pass


def _evaluate(method, turn, demonstrations):
    parts = _Parts(demonstrations)
    evaluator = TurnEvaluator(method, judge=parts, hint_judge=parts, teacher=parts, demonstrator=parts)
    view = TurnForJudge(session_id="s", turn_num=1, prompt_messages=turn.request["messages"],
                        response_message=turn.response_message, next_state=turn.next_state)
    return asyncio.run(evaluator.evaluate(turn, view)), parts


def test_a_teacher_that_answers_worse_than_the_policy_loses_its_term():
    answering_policy = _turn("There are 32 people: 30 - 5 = 25 and 25 + 7 = 32.")
    # every teacher candidate failed the check, the policy's reply passes: Combine keeps only its reward
    outcome, parts = _evaluate(Combine(), answering_policy, Demonstrations([], checked=2, answering=0))
    assert outcome.decision == Decision(True, reward=-1.0) and outcome.teacher is None
    assert outcome.judgement["extras"]["teacher_dropped"] and parts.stats["dropped"] == 1
    # OPD alone has nothing left to train on
    outcome, _ = _evaluate(OnPolicyDistillation(), answering_policy, Demonstrations([], checked=2, answering=0))
    assert not outcome.decision.trainable


@pytest.mark.parametrize("reply, demonstrations", [
    ("There are 32 people.", Demonstrations([_demo("Sure! 32 people.")], checked=2, answering=1)),  # one answered
    ("Sure!", Demonstrations([], checked=2, answering=0)),  # the policy does not answer either
    ("There are 32 people.", Demonstrations([], checked=0, answering=0)),  # nothing was checked
    ("There are 32 people.", []),  # a demonstrator without the check
])
def test_the_teacher_term_stays_otherwise(reply, demonstrations):
    outcome, parts = _evaluate(Combine(), _turn(reply), demonstrations)
    assert outcome.teacher is not None and outcome.judgement["extras"]["teacher_dropped"] is None
    assert parts.stats.get("dropped", 0) == 0
