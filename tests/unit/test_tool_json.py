"""A tool call whose JSON spells an unpaired surrogate is a malformed call (a parse error the policy is shown), not
an exception that ends the episode when the call is sent on (UnicodeEncodeError)."""

from __future__ import annotations

import pytest

from slime.agentic.agent_loop import parse_tool_calls
from slime.agentic.tool_json import loads_tool_json
from generate_with_retool import parse_action

LONE = '{"name": "shell_exec", "arguments": {"id": "main", "command": "echo \\ud800"}}'


def test_lone_surrogates_are_refused_and_pairs_and_raw_newlines_accepted():
    with pytest.raises(ValueError, match="unpaired surrogate \\(\\\\ud800\\)"):
        loads_tool_json(LONE)
    assert loads_tool_json('{"s": "\\ud83d\\ude00"}') == {"s": "\U0001F600"}  # a pair is one character
    assert loads_tool_json('{"code": "a\nb"}') == {"code": "a\nb"}  # raw newlines stay accepted (strict=False)


def test_the_agents_parsers_report_it_as_a_malformed_call():
    parsed = parse_tool_calls(f"<tool_call>\n{LONE}\n</tool_call>")
    assert parsed.calls == [] and "unpaired surrogate" in parsed.errors[0]
    nested = '{"name": "shell_exec", "arguments": "{\\"command\\": \\"echo \\\\udfff\\"}"}'
    assert "unpaired surrogate" in parse_tool_calls(f"<tool_call>\n{nested}\n</tool_call>").errors[0]
    call = '{"name": "code_interpreter", "arguments": {"code": "print(\\"\\udc80\\")"}}'
    assert parse_action(f"<tool_call>{call}</tool_call>").kind == "invalid"
