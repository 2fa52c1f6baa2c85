"""Pure judge helpers (boxed parsing, majority vote, rendering messages for a judge), the PRM prompt, the
cascade and the registry. OpenClaw's message conventions are tested in test_openclaw_conventions.py."""

from __future__ import annotations

import asyncio
import sys
import types

import pytest

from slime.conversation.judges import (
    CascadeJudge,
    Judgement,
    LLMJudge,
    RulesJudge,
    TurnForJudge,
    Vote,
    build_judge,
    build_prm_messages,
    last_user_request,
    majority_vote,
    parse_boxed_score,
    render_message_for_judge,
)
from slime.conversation.judges.embedding import EmbeddingJudge
from slime.conversation.judges.prompts import PRM_SYSTEM_PROMPT
from slime.conversation.judges.voting import truncate_middle

INTERNAL_TEXT = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
                 "\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")
INTERNAL = {"role": "user", "content": [{"type": "text", "text": INTERNAL_TEXT}]}


# --------------------------------------------------------------------------------------------------
# parse_boxed_score / majority_vote
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("so the answer is \\boxed{1}", 1),
    ("\\boxed{-1}", -1),
    ("\\boxed{+1}", 1),
    ("neutral: \\boxed{0}", 0),
    ("options are \\boxed{1} or \\boxed{-1}; I pick \\boxed{-1}", -1),  # the LAST box counts
    ("\\boxed{1} ... final: \\boxed{2}", None),  # last box is not an allowed score
    ("\\boxed{10}", None),  # exactly one digit
    ("\\boxed{ 1 }", None),
    ("\\boxed{-1.0}", None),
    ("boxed{1}", None),
    ("no score here", None),
    ("", None),
    (None, None),
])
def test_parse_boxed_score(text, expected):
    assert parse_boxed_score(text) == expected


def test_parse_boxed_score_allowed_values():
    assert parse_boxed_score("\\boxed{0}", allowed=(1, -1)) is None
    assert parse_boxed_score("\\boxed{1}", allowed=(1, -1)) == 1


@pytest.mark.parametrize("scores, expected", [
    ([1, 1, -1], 1.0),
    ([1, 0, -1], 0.0),
    ([1, None, None], 1.0),
    ([None, None, None], 0.0),
    ([1, -1, None], 0.0),
    ([-1, -1, 1], -1.0),
    ([0, 0, 1], 0.0),
    ([], 0.0),
    ([-1], -1.0),
    ([1, 1, -1, -1, 0], 0.0),  # tie for the top count
    ([1, 1, -1, 0, 0, 0], 0.0),
])
def test_majority_vote(scores, expected):
    result = majority_vote(scores)
    assert result == expected and isinstance(result, float)


# --------------------------------------------------------------------------------------------------
# rendering messages for a judge
# --------------------------------------------------------------------------------------------------


def test_render_message_for_judge_shows_tool_calls():
    message = {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": {"path": "/tmp"}}},
    ]}
    assert render_message_for_judge(message) == (
        'Let me check.\n[tool call] get_weather({"city": "Paris"})\n[tool call] ls({"path": "/tmp"})')
    assert render_message_for_judge({"role": "assistant", "content": None, "tool_calls": [
        {"function": {"name": "exec", "arguments": "{}"}}]}) == "[tool call] exec({})"


def test_truncate_middle():
    assert truncate_middle("short", 100) == "short"
    text = "A" * 50 + "B" * 50
    cut = truncate_middle(text, 20)
    assert cut.startswith("A" * 10) and cut.endswith("B" * 10) and "80 characters omitted" in cut
    assert truncate_middle(text, None) == text


# --------------------------------------------------------------------------------------------------
# the PRM prompt
# --------------------------------------------------------------------------------------------------


def _openclaw_prompt() -> list[dict]:
    return [
        {"role": "system", "content": "You are a personal assistant running inside OpenClaw."},
        {"role": "user", "content": "[Sat 2026-11-21 23:35 UTC] hello\n\nRuntime: agent=main | sessionId=s"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "[Sat 2026-11-21 23:36 UTC] What is the weather in Paris and Rome?"},
        INTERNAL,
    ]


def test_prm_prompt_semantics():
    text = PRM_SYSTEM_PROMPT
    for needle in ("process reward model", "next state", "[role: user]", "[role: tool]", "\\boxed{1}",
                   "\\boxed{-1}", "\\boxed{0}", "no, I meant", "please fix", "step by step", "negative feedback"):
        assert needle in text, needle


def test_prm_prompt_includes_every_next_state_message_and_the_request():
    response = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}]}
    next_state = [
        {"role": "tool", "tool_call_id": "a", "content": "sunny, 21 C"},
        {"role": "tool", "tool_call_id": "b", "content": "rain, 14 C"},
        {"content": "[Sat 2026-11-21 23:37 UTC] and tomorrow?"},  # no role: upstream defaults to user
        INTERNAL,
    ]
    messages = build_prm_messages(response, next_state, _openclaw_prompt())
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert user.index("## User request") < user.index("## Assistant output") < user.index("## Next state")
    assert "What is the weather in Paris and Rome?" in user and "Sat 2026" not in user
    assert '[tool call] get_weather({"city": "Rome"})' in user
    assert "## Next state [role: tool]\nsunny, 21 C" in user
    assert "## Next state [role: tool]\nrain, 14 C" in user  # every tool result, not only messages[-1]
    assert "## Next state [role: user]\nand tomorrow?" in user
    assert "INTERNAL_CONTEXT" not in user and "Active exec sessions" not in user
    assert "(a)" in user and "(b)" in user and "(c)" in user and user.rstrip().endswith("\\boxed{0}.")


def test_last_user_request_skips_internal_context_and_truncates():
    assert last_user_request(_openclaw_prompt()) == "What is the weather in Paris and Rome?"
    assert last_user_request([{"role": "system", "content": "x"}]) == ""
    long_request = [{"role": "user", "content": "word " * 2000}]
    user = build_prm_messages({"role": "assistant", "content": "ok"}, [{"role": "user", "content": "thanks"}],
                              long_request, request_chars=100)[1]["content"]
    assert "characters omitted" in user and len(user) < 1000
    no_request = build_prm_messages({"role": "assistant", "content": "ok"}, [{"role": "user", "content": "hi"}])
    assert "## User request" not in no_request[1]["content"]


def test_llm_judge_prompt_uses_its_request_limit():
    judge = LLMJudge("http://127.0.0.1:9", request_chars=50)
    turn = TurnForJudge("s", 1, [{"role": "user", "content": "x" * 500}], {"role": "assistant", "content": "y"},
                        [{"role": "user", "content": "thanks"}])
    assert "characters omitted" in judge.prompt(turn)[1]["content"]
    asyncio.run(judge.aclose())


# --------------------------------------------------------------------------------------------------
# cascade
# --------------------------------------------------------------------------------------------------


class FixedJudge:
    """A judge with a preset answer, to drive the cascade's control flow."""

    def __init__(self, name, score, failed=False, raises=False):
        self.name, self.score, self.failed, self.raises = name, score, failed, raises
        self.calls = 0
        self.closed = False

    async def judge(self, turn):
        self.calls += 1
        if self.raises:
            raise RuntimeError("plugin bug")
        vote = Vote(score=None if self.failed else self.score, rationale=f"{self.name} says {self.score}",
                    source=self.name, error="timeout" if self.failed else None)
        return Judgement(score=float(self.score), votes=[vote], judge=self.name,
                         rationale=vote.rationale if self.score else "", failed=self.failed, extras={"k": self.name})

    async def aclose(self):
        self.closed = True


TURN = TurnForJudge("s", 1, [{"role": "user", "content": "hi"}], {"role": "assistant", "content": "hello"},
                    [{"role": "user", "content": "what about Paris?"}])


def test_cascade_first_nonzero_decides_and_keeps_all_votes():
    a, b, c = FixedJudge("a", 0), FixedJudge("b", -1), FixedJudge("c", 1)
    cascade = CascadeJudge([a, b, c])
    assert cascade.name == "a+b+c"
    result = asyncio.run(cascade.judge(TURN))
    assert result.score == -1.0 and result.judge == "a+b+c" and result.rationale == "b says -1"
    assert [v.source for v in result.votes] == ["a", "b"] and c.calls == 0
    assert result.extras["decided_by"] == "b" and result.extras["ran"] == ["a", "b"]
    asyncio.run(cascade.aclose())
    assert a.closed and b.closed and c.closed


def test_cascade_all_neutral_and_failures():
    neutral = asyncio.run(CascadeJudge([FixedJudge("a", 0), FixedJudge("b", 0)]).judge(TURN))
    assert neutral.score == 0.0 and not neutral.failed and len(neutral.votes) == 2
    assert neutral.extras["decided_by"] is None
    failed = asyncio.run(CascadeJudge([FixedJudge("a", 0, failed=True), FixedJudge("b", 0, raises=True)]).judge(TURN))
    assert failed.score == 0.0 and failed.failed
    assert failed.votes[1].error.startswith("judge raised RuntimeError") and failed.votes[1].source == "b"
    recovered = asyncio.run(CascadeJudge([FixedJudge("a", 0, raises=True), FixedJudge("b", 1)]).judge(TURN))
    assert recovered.score == 1.0 and not recovered.failed


def test_rules_then_embedding_cascade_skips_the_model_on_explicit_feedback():
    cascade = build_judge("rules+embedding", model_path="/nonexistent/model")
    thanks = TurnForJudge("s", 1, [{"role": "user", "content": "hi"}], {"role": "assistant", "content": "hello"},
                          [{"role": "user", "content": "thanks!"}])
    result = asyncio.run(cascade.judge(thanks))
    assert result.score == 1.0 and [v.source for v in result.votes] == ["rules"]
    # a neutral reply reaches the embedding judge, whose (here missing) model fails softly
    result = asyncio.run(cascade.judge(TURN))
    assert result.score == 0.0 and [v.source for v in result.votes] == ["rules", "embedding"]
    assert result.votes[1].error.startswith("embedding error") and not result.failed


# --------------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------------


def test_build_builtin_kinds():
    assert isinstance(build_judge("rules"), RulesJudge)
    embedding = build_judge("embedding", threshold=0.5, margin=0.1)
    assert isinstance(embedding, EmbeddingJudge) and embedding.threshold == 0.5 and embedding._model is None
    llm = build_judge("llm", engine_url="http://127.0.0.1:9", m=5)
    assert isinstance(llm, LLMJudge) and llm.m == 5 and llm.name == "llm"
    asyncio.run(llm.aclose())
    cascade = build_judge("rules+embedding", threshold=0.4)
    assert isinstance(cascade, CascadeJudge) and cascade.name == "rules+embedding"
    assert cascade.judges[1].threshold == 0.4


def test_build_errors():
    with pytest.raises(ValueError, match="embedding, llm, rules.*rules\\+embedding"):
        build_judge("prm")
    with pytest.raises(ValueError, match="engine_url"):
        build_judge("llm")
    with pytest.raises(ValueError, match="bad options"):
        build_judge("rules", threshold=0.3)
    with pytest.raises(ValueError, match="accepted by no judge"):
        build_judge("rules+embedding", tresh=0.3)
    with pytest.raises(ValueError, match="not built-in"):
        build_judge("rules+magic")


def _plugin_module():
    module = types.ModuleType("judge_plugin_for_tests")

    class Constant:
        def __init__(self, score=1):
            self.name, self.score = "constant", score

        async def judge(self, turn):
            return Judgement(score=float(self.score), votes=[Vote(self.score, "constant", "constant")], judge=self.name)

        async def aclose(self):
            pass

    module.make = lambda **options: Constant(**options)
    module.not_a_judge = lambda **options: object()
    module.VALUE = 3
    return module


def test_build_plugin(monkeypatch):
    monkeypatch.setitem(sys.modules, "judge_plugin_for_tests", _plugin_module())
    for spec in ("judge_plugin_for_tests:make", "judge_plugin_for_tests.make"):
        judge = build_judge(spec, score=-1)
        assert judge.name == "constant" and asyncio.run(judge.judge(TURN)).score == -1.0
    with pytest.raises(ValueError, match="no judge or aclose"):
        build_judge("judge_plugin_for_tests:not_a_judge")
    with pytest.raises(ValueError, match="no callable"):
        build_judge("judge_plugin_for_tests:VALUE")
    with pytest.raises(ValueError, match="cannot import"):
        build_judge("no_such_module_xyz:factory")
