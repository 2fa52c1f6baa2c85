"""Tool-call RL's pieces: parsing an action, the observation, the tools file, the reward."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from slime.agentic.toolcall import (INVALID_ACTION, Action, format_observation, load_tools, parse_action,
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
    assert asyncio.run(reward_func(args, trajectory("0.5", 1, 1))) == {"score": 1.0, "acc": 1.0}
    # wrong: -1 + 0.1 * (ok - 2) / 2 with only the 6 successful calls counted, capped at -0.6
    assert asyncio.run(reward_func(args, trajectory("3", 9, 6)))["score"] == pytest.approx(-0.8)
    assert asyncio.run(reward_func(args, trajectory(None, 0, 0)))["score"] == pytest.approx(-1.1)
    # the step samples of one trajectory (dynamic history) get one reward each
    steps = [trajectory("0.5", 2, 2), trajectory("0.5", 2, 2)]
    assert asyncio.run(reward_func(args, steps)) == [{"score": 1.0, "acc": 1.0}] * 2
    json.dumps(asyncio.run(reward_func(args, trajectory("1", 0, 0))))  # plain numbers
