"""Tool-call RL's pieces: parsing an action, the observation, the tools file, the reward."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from generate_with_retool import (INVALID_ACTION, Action, format_observation, load_tools, parse_action,
                                    reward_func)
from slime.utils.types import Sample

CALL = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(2**10)"}}\n</tool_call>'


@pytest.mark.parametrize("text, expected", [
    (CALL, Action("tool", "code_interpreter", {"code": "print(2**10)"})),
    # pretty-printed JSON with a raw newline inside the code string (upstream's repair broke one or the other)
    ('<tool_call>{\n  "name": "code_interpreter",\n  "arguments": {"code": "x = 3\nprint(x)"}\n}</tool_call>',
     Action("tool", "code_interpreter", {"code": "x = 3\nprint(x)"})),
    ('<tool_call>{"name": "code_interpreter", "arguments": "{\\"code\\": \\"print(1)\\"}"}</tool_call>',
     Action("tool", "code_interpreter", {"code": "print(1)"})),
    ("Let me compute.\n<code>\nprint(7*6)\n</code>", Action("tool", "code_interpreter", {"code": "print(7*6)"})),
    ("```python\nprint(1+1)\n```", Action("tool", "code_interpreter", {"code": "print(1+1)\n"})),
    ("So the answer is Answer: \\boxed{\\frac{1}{2}}", Action("answer", answer="\\frac{1}{2}")),
    # computed, then answered: the answer (last) wins; answered, then more code: the code wins
    (CALL + " result 1024. Answer: \\boxed{1024}", Action("answer", answer="1024")),
    ("Answer: \\boxed{3}? Let me check. " + CALL, Action("tool", "code_interpreter", {"code": "print(2**10)"})),
    ('<tool_call>{"name": "web_search", "arguments": {"q": "x"}}</tool_call>', Action("invalid")),
    ('<tool_call>{"name": "code_interpreter", "arguments": {"code": "  "}}</tool_call>', Action("invalid")),
    ("<tool_call>not json</tool_call>", Action("invalid")),
    ("I think it is 5.", Action("invalid")),
    ("\\boxed{}", Action("invalid")),
])
def test_parse_action(text, expected):
    assert parse_action(text) == expected


def test_observations_are_wrapped_and_truncated():
    assert format_observation("1024") == "\n\n<interpreter>\n1024\n</interpreter>\n\n"
    long = format_observation("x" * 5000, max_chars=100)
    assert long.count("x") == 100 and "(4900 more characters)" in long
    assert "<tool_call>" in INVALID_ACTION and "\\boxed{answer}" in INVALID_ACTION  # the advertised formats


def test_tools_file(tmp_path):
    assert [t.name for t in load_tools(None)] == ["code_interpreter"]
    shipped = load_tools("toolcall-rl/tools.json")
    assert [(t.name, t.runner) for t in shipped] == [("code_interpreter", "python")]
    bad = tmp_path / "tools.json"
    for content, message in [("[]", "non-empty JSON list"), ("{", "not JSON"),
                             ('[{"type": "function"}]', "tool 0 must be"),
                             ('[{"function": {"name": "a"}, "runner": "nope"}]', "runner must be"),
                             ('[{"function": {"name": "a"}}, {"function": {"name": "a"}}]', "repeat")]:
        bad.write_text(content)
        with pytest.raises(ValueError, match=message):
            load_tools(bad)


def test_reward_is_by_value_and_shapes_only_successful_calls():
    def trajectory(answer, calls, ok, label="1/2"):
        return Sample(label=label, metadata={"answer": answer, "tool_calls": calls, "successful_tool_calls": ok})

    args = SimpleNamespace()
    assert asyncio.run(reward_func(args, trajectory("0.5", 1, 1))) == {
        "score": 1.0, "acc": 1.0, "tool_call": 1.0, "answered": 1.0, "parse_error": 0.0, "budget_exceeded": 0.0}
    # the components evaluation reports: a direct answer calls no tool; an invalid step is a parse error
    unparsed = Sample(label="2", metadata={"answer": "2", "tool_calls": 0, "successful_tool_calls": 0,
                                           "invalid_actions": 1})
    assert asyncio.run(reward_func(args, unparsed)) == {
        "score": 1.0, "acc": 1.0, "tool_call": 0.0, "answered": 1.0, "parse_error": 1.0, "budget_exceeded": 0.0}
    # a right answer after a call that went over a whole-sandbox budget: the episode ended there, -1
    over = Sample(label="2", metadata={"answer": "2", "tool_calls": 1, "successful_tool_calls": 0,
                                       "budget_exceeded": "went over its memory budget (2048 MiB ...)"})
    assert asyncio.run(reward_func(args, over)) == {
        "score": -1.0, "acc": 0.0, "tool_call": 1.0, "answered": 1.0, "parse_error": 0.0, "budget_exceeded": 1.0}
    # wrong: -1 + 0.1 * (ok - 2) / 2 with only the 6 successful calls counted, capped at -0.6
    assert asyncio.run(reward_func(args, trajectory("3", 9, 6)))["score"] == pytest.approx(-0.8)
    assert asyncio.run(reward_func(args, trajectory(None, 0, 0)))["score"] == pytest.approx(-1.1)
    # the step samples of one trajectory (dynamic history) get one reward each
    steps = [trajectory("0.5", 2, 2), trajectory("0.5", 2, 2)]
    assert asyncio.run(reward_func(args, steps)) == [
        {"score": 1.0, "acc": 1.0, "tool_call": 1.0, "answered": 1.0, "parse_error": 0.0, "budget_exceeded": 0.0}] * 2
    json.dumps(asyncio.run(reward_func(args, trajectory("1", 0, 0))))  # plain numbers


def test_the_prm_prompt_is_plain_capped_text_and_every_vote_has_its_seed():
    from slime.agentic.prm import MAX_TRAJECTORY_CHARS, judge_messages

    system, user = judge_messages("What is 2+2?", "§" * 50_000, "<tool_call>...</tool_call>", "4", step_index=3)
    assert system["role"] == "system" and "\\boxed{1}" in system["content"] and "\\boxed{-1}" in system["content"]
    body = user["content"]
    assert "Step index: 3" in body and "Do NOT continue the trajectory" in body and "<|im_start|>" not in body
    assert body.count("§") == MAX_TRAJECTORY_CHARS and "earlier steps omitted" in body  # the tail is kept


def test_step_judge_votes_and_unjudged_steps():
    from slime.agentic.prm import StepJudge

    class Engine:  # the engine protocol's chat call, answering from a script per seed
        def __init__(self, replies):
            self.replies, self.seeds = replies, []

        async def chat(self, body):
            self.seeds.append(body["seed"])
            reply = self.replies[len(self.seeds) - 1]
            if isinstance(reply, Exception):
                raise reply
            return {"choices": [{"message": {"content": reply}}]}

    engine = Engine(["fine \\boxed{1}", "no \\boxed{-1}", "\\boxed{1}"])
    judge = StepJudge(engine, m=3)
    assert asyncio.run(judge.score("p", "", "a", "o", step_index=2, seed=5)) == pytest.approx(1 / 3)
    assert len(set(engine.seeds)) == 3
    engine = Engine(["maybe", RuntimeError("down"), "\\boxed{0}"])
    judge = StepJudge(engine, m=3)
    assert asyncio.run(judge.score("p", "", "a", "o", step_index=0)) is None  # no valid vote: unjudged, not 0
    assert judge.stats == {"steps": 1, "votes": 2, "invalid_votes": 2, "failed_calls": 1, "unjudged_steps": 1}


def test_prm_scores_become_step_targets_with_the_coef():
    meta = {"answer": "4", "tool_calls": 1, "successful_tool_calls": 1, "step_wise": {"prm_scores": [1.0, None, -1.0]}}
    sample = Sample(label="4", metadata=meta)
    reward = asyncio.run(reward_func(SimpleNamespace(prm_step_coef=0.5), sample))
    # outcome +1; targets 1 + 0.5*1, 1 (unjudged: the outcome alone), 1 + 0.5*(-1)
    assert sample.metadata["step_wise"]["step_scores_with_outcome"] == [1.5, 1.0, 0.5]
    assert reward["score"] == 1.0 and "prm_step_score" in reward


def test_the_rule_step_judge_scores_what_the_environment_said():
    from generate_with_retool import RuleStepJudge

    judge = RuleStepJudge()

    def score(action, observation="", history=""):
        return asyncio.run(judge.score("What is 6*7?", history, action, observation, step_index=0))

    call = '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}</tool_call>'
    assert score(call, format_observation("42")) == 1.0
    assert score(call, format_observation("Errors:\n  NameError: name 'x' is not defined")) == -1.0
    assert score(call, format_observation("Error: the process exited with code 1")) == -1.0
    assert score(call, format_observation("41\nError: the code ran past its 30 s limit and was stopped")) == -1.0
    assert score(call, format_observation("Error: the budget of 8 tool calls is spent; answer now.")) == -1.0
    assert score("hmm", format_observation(INVALID_ACTION)) == -1.0
    # the answer: grounded in something a call printed, or a guess
    history = call + format_observation("42")
    assert score("Answer: \\boxed{42}", history=history) == 1.0
    assert score("Answer: \\boxed{41}", history=history) == -1.0
    assert score("Answer: \\boxed{42}") == -1.0
    assert score("I think the answer is", history=history) == -1.0  # cut off: no answer


def test_the_step_judge_is_chosen_by_flag(monkeypatch):
    import generate_with_retool as toolcall

    async def pick(**kw):
        return toolcall._step_judge(SimpleNamespace(**kw))

    assert asyncio.run(pick()) is None  # no PRM configured: no judge
    assert isinstance(asyncio.run(pick(step_judge="rules")), toolcall.RuleStepJudge)
    with pytest.raises(ValueError, match="needs a PRM engine"):
        asyncio.run(pick(step_judge="llm"))
    with pytest.raises(ValueError, match="built-in judges: llm, rules"):
        asyncio.run(pick(step_judge="no_such_module_xyz:make"))
    plugin = asyncio.run(pick(step_judge="generate_with_retool:RuleStepJudge"))  # module:factory(args)
    assert isinstance(plugin, toolcall.RuleStepJudge)
