"""Hint-judge parsing, selection (positive votes, longest hint), the overlap `choose` hook, the prompt, and
`build_hint_judge`.

The LLM hint judge runs here against a scripted chat function in place of the engine client (the real
engine path is tests/integration/test_llm_hint_judge.py)."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from slime.conversation.judges import (
    CascadeHintJudge,
    HintJudge,
    HintResult,
    LLMHintJudge,
    RulesHintJudge,
    TurnForJudge,
    Vote,
    build_hint_judge,
    build_hint_messages,
    choose,
    hint_candidates,
    parse_hint,
    parse_hint_score,
    select_longest,
)

REQUEST = [{"role": "system", "content": "You are helpful."},
           {"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] What is the weather in Paris?"}]
ANSWER = {"role": "assistant", "content": "It is sunny and 21 C in Paris."}
TURN = TurnForJudge("s1", 3, REQUEST, ANSWER, [{"role": "user", "content": "no, I meant Paris, Texas"}])


def positive(hint: str) -> str:
    return f"The user corrects the city. \\boxed{{1}}\n[HINT_START]{hint}[HINT_END]"


# --------------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, score", [
    ("\\boxed{1}", 1), ("\\boxed{-1}", -1), ("\\boxed{+1}", 1),
    ("\\boxed{0}", None),  # not a hint-judge answer
    ("\\boxed{2}", None), ("no box", None), ("", None), (None, None),
    ("either \\boxed{1} or \\boxed{-1} ... final: \\boxed{-1}", -1),  # the last one counts
    ("\\boxed{1} then \\boxed{0}", None),  # the last is 0: invalid, no fallback to an earlier one
    ("\\boxed{11}", None),
])
def test_parse_hint_score(text, score):
    assert parse_hint_score(text) == score


@pytest.mark.parametrize("text, hint", [
    ("[HINT_START] Use Celsius. [HINT_END]", "Use Celsius."),
    ("[HINT_START]first[HINT_END] and [HINT_START]\n second one \n[HINT_END]", "second one"),  # the last block
    ("[HINT_START]multi\nline\nhint[HINT_END]", "multi\nline\nhint"),  # DOTALL
    ("[HINT_START]a [HINT_START]b[HINT_END]", "a [HINT_START]b"),  # non-greedy from the first start
    ("[HINT_START]unterminated", ""), ("no hint", ""), ("", ""), (None, ""),
    ("\\boxed{-1} [HINT_START]parsed even for a negative vote[HINT_END]", "parsed even for a negative vote"),
])
def test_parse_hint(text, hint):
    assert parse_hint(text) == hint


def test_candidates_need_a_positive_score_and_a_hint_longer_than_the_minimum():
    scores = [1, -1, 1, None, 1, 1]
    hints = ["0123456789", "a long hint from a negative vote", "01234567890", "a long hint, unparseable score",
             "  0123456789  ", ""]
    # exactly 10 characters is too short (> 10 needed); whitespace does not count; -1 and None never qualify
    assert hint_candidates(scores, hints) == [2]
    assert hint_candidates(scores, hints, min_hint_chars=5) == [0, 2, 4]
    assert hint_candidates([], []) == []


def test_longest_wins_and_ties_go_to_the_first():
    hints = ["short hint x", "the longest hint of all", "another hint of 23 chr", "the longest hint of all"]
    assert select_longest(hints, [0, 1, 2, 3]) == 1
    assert select_longest(hints, [3, 1]) == 3  # first in candidate order
    assert select_longest(["  padded  hint  ", "unpadded hint!"], [0, 1]) == 1  # stripped lengths compare 12 vs 14
    assert select_longest(hints, []) is None


# --------------------------------------------------------------------------------------------------
# choose (teacher-overlap hook)
# --------------------------------------------------------------------------------------------------


def test_choose_picks_the_highest_score_first_on_ties():
    async def scorer(hint):
        await asyncio.sleep(0)
        return {"a": 0.1, "bb": 0.7, "ccc": 0.7, "dddd": -1.0}[hint]

    index, scores = asyncio.run(choose(["a", "bb", "ccc", "dddd"], scorer))
    assert index == 1 and scores == [0.1, 0.7, 0.7, -1.0]


def test_choose_survives_a_failing_scorer_and_falls_back_to_longest():
    async def flaky(hint):
        if hint == "boom":
            raise RuntimeError("teacher down")
        return float("nan") if hint == "nan" else 0.5

    index, scores = asyncio.run(choose(["boom", "ok", "nan"], flaky))
    assert index == 1 and scores == [None, 0.5, None]

    async def broken(hint):
        raise RuntimeError("teacher down")

    index, scores = asyncio.run(choose(["short one", "the longest one", "mid length"], broken))
    assert index == 1 and scores == [None, None, None]


def test_choose_single_candidate_is_not_scored():
    calls = []

    async def scorer(hint):
        calls.append(hint)
        return 1.0

    assert asyncio.run(choose(["only"], scorer)) == (0, [None]) and calls == []
    with pytest.raises(ValueError):
        asyncio.run(choose([], scorer))


# --------------------------------------------------------------------------------------------------
# the prompt
# --------------------------------------------------------------------------------------------------


def test_prompt_has_request_response_and_every_next_state_message():
    internal = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nscratch"}
    turn = TurnForJudge("s", 1, REQUEST + [internal],
                        {"role": "assistant", "content": "",
                         "tool_calls": [{"id": "a", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}},
                                        {"id": "b", "function": {"name": "clock", "arguments": "{}"}}]},
                        [{"role": "tool", "tool_call_id": "a", "content": "sunny, 21 C"},
                         {"role": "tool", "tool_call_id": "b", "content": "Error: clock unavailable"},
                         internal,
                         {"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] in Fahrenheit please"}])
    system, user = build_hint_messages(turn.response_message, turn.next_state, turn.prompt_messages)
    assert system["role"] == "system" and "[HINT_START]" in system["content"] and "\\boxed{-1}" in system["content"]
    text = user["content"]
    assert "## User request\nWhat is the weather in Paris?" in text  # timestamp gone, internal context skipped
    assert '[tool call] weather({"city":"Paris"})' in text and "[tool call] clock({})" in text
    assert text.count("## Next state [role: tool]") == 2 and "Error: clock unavailable" in text
    assert "## Next state [role: user]\nin Fahrenheit please" in text
    assert "BEGIN_OPENCLAW_INTERNAL_CONTEXT" not in text
    assert LLMHintJudge("http://127.0.0.1:9").prompt(turn) == [system, user]


# --------------------------------------------------------------------------------------------------
# LLMHintJudge selection, with a scripted engine
# --------------------------------------------------------------------------------------------------


def scripted_judge(outputs, **options) -> LLMHintJudge:
    """An LLMHintJudge whose engine answers vote i with outputs[i] (an exception is raised, a float sleeps)."""
    judge = LLMHintJudge("http://127.0.0.1:9", m=len(outputs), **options)
    calls = iter(range(len(outputs)))

    async def chat(body):
        output = outputs[next(calls)]
        if isinstance(output, Exception):
            raise output
        if isinstance(output, float):
            await asyncio.sleep(output)
            output = positive("too late to matter")
        return {"choices": [{"message": {"role": "assistant", "content": output}}]}

    judge._client.chat = chat
    return judge


def run_hint(judge, turn=TURN, **kwargs) -> HintResult:
    async def go():
        try:
            return await judge.hint(turn, **kwargs)
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_llm_hint_picks_the_longest_positive_hint():
    judge = scripted_judge([
        positive("The user is in Paris, Texas."),
        "\\boxed{-1} [HINT_START]A much longer hint that must be ignored: the vote is negative.[HINT_END]",
        positive("The user means Paris, Texas, USA; give its weather."),
        positive("Too short"),
        "I cannot decide.",
    ])
    result = run_hint(judge)
    assert result.accepted and not result.failed and result.judge == "llm"
    assert result.hint == "The user means Paris, Texas, USA; give its weather."
    assert [v.score for v in result.votes] == [1, -1, 1, 1, None]
    assert result.votes[4].error == "unparseable" and result.votes[4].rationale == "I cannot decide."
    assert result.votes[0].rationale == positive("The user is in Paris, Texas.")  # raw text kept
    assert result.extras["candidates"] == [0, 2] and result.extras["chosen"] == 2
    assert result.extras["vote_hints"][1].startswith("A much longer hint")
    assert judge.stats == {"calls": 1, "votes": 5, "failures": 0, "timeouts": 0, "unparseable": 1, "accepted": 1}
    again = HintResult.from_dict(result.to_dict())
    assert again == result and isinstance(again.votes[0], Vote)


def test_llm_hint_ties_go_to_the_first_vote():
    result = run_hint(scripted_judge([positive("Answer for Texas."), positive("Answer for TEXAS.")]))
    assert result.hint == "Answer for Texas." and result.extras["chosen"] == 0


@pytest.mark.parametrize("outputs", [
    ["\\boxed{-1}", "\\boxed{-1}"],
    ["\\boxed{1} [HINT_START]0123456789[HINT_END]"],  # 10 characters: too short
    ["\\boxed{1} but no hint block"],
    ["\\boxed{0} [HINT_START]neutral is not a decision[HINT_END]"],
])
def test_llm_hint_not_accepted(outputs):
    result = run_hint(scripted_judge(outputs))
    assert not result.accepted and result.hint == "" and "chosen" not in result.extras


def test_llm_hint_failures_are_counted_never_raised():
    judge = scripted_judge([RuntimeError("connection reset"), 5.0, "garbage"], timeout=0.05)
    result = run_hint(judge)
    assert not result.accepted and result.failed
    assert result.votes[0].error == "engine error: RuntimeError: connection reset"
    assert result.votes[1].error == "timeout" and result.votes[2].error == "unparseable"
    assert judge.stats["failures"] == 2 and judge.stats["timeouts"] == 1 and judge.stats["unparseable"] == 1


def test_llm_hint_one_failure_does_not_hide_a_good_vote():
    result = run_hint(scripted_judge([RuntimeError("down"), positive("The user means Paris, Texas.")]))
    assert result.accepted and not result.failed and result.hint == "The user means Paris, Texas."


def test_overlap_selection_uses_the_scorer():
    outputs = [positive("Short but right hint."), positive("A much longer hint that the teacher dislikes.")]
    seen = []

    async def scorer(hint):
        seen.append(hint)
        return 1.0 if hint.startswith("Short") else 0.0

    result = run_hint(scripted_judge(outputs, select="overlap"), scorer=scorer)
    assert result.hint == "Short but right hint." and result.extras["select"] == "overlap"
    assert result.extras["overlap_scores"] == [1.0, 0.0] and sorted(seen) == sorted(parse_hint(o) for o in outputs)

    async def turn_scorer(turn, hint):  # configured once, gets the turn
        assert turn is TURN
        return float(len(hint) < 30)

    result = run_hint(scripted_judge(outputs, select="overlap", overlap_scorer=turn_scorer))
    assert result.hint == "Short but right hint."
    # default selection ignores scorers; overlap without any scorer falls back to longest
    assert run_hint(scripted_judge(outputs), scorer=scorer).hint.startswith("A much longer")
    fallback = run_hint(scripted_judge(outputs, select="overlap"))
    assert fallback.hint.startswith("A much longer") and "no scorer" in fallback.extras["select"]


def test_llm_hint_rejects_bad_settings():
    with pytest.raises(ValueError, match="select"):
        LLMHintJudge("http://127.0.0.1:9", select="best")
    with pytest.raises(ValueError, match="m"):
        LLMHintJudge("http://127.0.0.1:9", m=0)


# --------------------------------------------------------------------------------------------------
# build_hint_judge and the cascade
# --------------------------------------------------------------------------------------------------


def test_build_hint_judge_kinds():
    rules = build_hint_judge("rules")
    assert isinstance(rules, RulesHintJudge) and isinstance(rules, HintJudge)
    llm = build_hint_judge("llm", engine_url="http://127.0.0.1:9", m=2, min_hint_chars=5, timeout=3)
    assert isinstance(llm, LLMHintJudge) and llm.m == 2 and llm.min_hint_chars == 5 and llm.timeout == 3
    cascade = build_hint_judge(" rules+llm ", engine_url="http://127.0.0.1:9", m=3)
    assert isinstance(cascade, CascadeHintJudge) and cascade.name == "rules+llm"
    assert [type(j) for j in cascade.judges] == [RulesHintJudge, LLMHintJudge] and cascade.judges[1].m == 3
    for call in (lambda: asyncio.run(llm.aclose()), lambda: asyncio.run(cascade.aclose())):
        call()


@pytest.mark.parametrize("kind, options, message", [
    ("llm", {}, "needs engine_url"),
    ("rules", {"m": 3}, "bad options for hint judge kind 'rules'"),
    ("embedding", {}, "unknown hint judge kind"),
    ("rules+embedding", {}, "not built-in kinds"),
    ("rules+llm", {"engine_url": "http://x", "colour": 1}, "accepted by no hint judge"),
    ("no_such_module_xyz:make", {}, "cannot import module"),
    ("json:no_such_factory", {}, "has no callable"),
])
def test_build_hint_judge_errors(kind, options, message):
    with pytest.raises(ValueError, match=message):
        build_hint_judge(kind, **options)


class _PluginHintJudge:
    name = "plugin"

    def __init__(self, hint="", raise_error=False):
        self._hint, self._raise = hint, raise_error

    async def hint(self, turn):
        if self._raise:
            raise RuntimeError("plugin bug")
        return HintResult(accepted=bool(self._hint), hint=self._hint,
                          votes=[Vote(score=1 if self._hint else -1, rationale="", source="plugin")], judge="plugin")

    async def aclose(self):
        return None


class _SyncHint:
    name = "sync"

    def hint(self, turn):
        return None

    async def aclose(self):
        return None


class _JudgeOnly:
    name = "prm"

    async def judge(self, turn):
        return None

    async def aclose(self):
        return None


def test_plugin_hint_judge(monkeypatch):
    module = types.ModuleType("hint_plugin_mod")
    module.make = lambda **options: _PluginHintJudge(**options)
    module.make_sync = lambda **options: _SyncHint()
    module.make_judge_only = lambda **options: _JudgeOnly()  # a PRM judge is not a hint judge
    monkeypatch.setitem(sys.modules, "hint_plugin_mod", module)
    judge = build_hint_judge("hint_plugin_mod:make", hint="Use Celsius for temperatures.")
    assert run_hint(judge).hint == "Use Celsius for temperatures."
    assert build_hint_judge("hint_plugin_mod.make").name == "plugin"
    with pytest.raises(ValueError, match=r"hint\(\) must be async"):
        build_hint_judge("hint_plugin_mod:make_sync")
    with pytest.raises(ValueError, match=r"needs async hint\(turn\) and aclose\(\)"):
        build_hint_judge("hint_plugin_mod:make_judge_only")


def test_cascade_rules_first_then_llm_and_plugin_errors_are_contained():
    # rules find the hint: the LLM is never asked
    llm = scripted_judge([positive("never requested, never used")])
    asked = []
    real = llm._client.chat

    async def spy(body):
        asked.append(body)
        return await real(body)

    llm._client.chat = spy
    turn = TurnForJudge("s", 1, REQUEST, ANSWER, [{"role": "user", "content": "too long, one sentence"}])
    result = run_hint(CascadeHintJudge([RulesHintJudge(), llm]), turn)
    assert result.accepted and result.hint == "Answer in one short sentence." and asked == []
    assert result.extras["decided_by"] == "rules" and result.judge == "rules+llm"

    # rules find nothing: the LLM decides; every vote is kept
    neutral = TurnForJudge("s", 1, REQUEST, ANSWER, [{"role": "user", "content": "hmm, and what about Lyon?"}])
    result = run_hint(CascadeHintJudge([RulesHintJudge(), scripted_judge([positive("Also cover nearby Lyon.")])]),
                      neutral)
    assert result.accepted and result.hint == "Also cover nearby Lyon." and result.extras["decided_by"] == "llm"
    assert [v.source for v in result.votes] == ["rules", "llm"] and result.votes[0].score == -1

    # a plugin that raises costs its vote; nobody accepts; not every judge failed
    result = run_hint(CascadeHintJudge([_PluginHintJudge(raise_error=True), RulesHintJudge()]), neutral)
    assert not result.accepted and not result.failed and result.extras["failed_judges"] == ["plugin"]
    assert result.votes[0].error == "judge raised RuntimeError: plugin bug"
