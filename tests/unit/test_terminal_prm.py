"""The terminal per-turn PRM's pure parts: upstream's `current` record, the history it shows, the judge's input, and
the CPU rule judge."""

from __future__ import annotations

import asyncio
import json

import pytest

from slime.agentic.agent_loop import ToolCall
from terminal_prm import (
    RESULT_CHARS,
    TerminalRuleJudge,
    judge_messages,
    select_history,
    turn_record,
)


def record(k, results=(), parse_errors=0, text="thinking"):
    calls = [ToolCall("shell_exec", {"id": "main", "command": f"cmd {k}"}) for _ in results]
    return turn_record(k, text, calls, list(zip(calls, results)), parse_errors)


def test_the_record_is_upstreams_current():
    r = record(2, ["out"], text="x" * 5000)
    assert r == {"turn_idx": 2, "assistant_text": "x" * 2000,
                 "tool_calls": [{"tool_name": "shell_exec", "args": {"id": "main", "command": "cmd 2"}}],
                 "tool_results": [{"name": "shell_exec", "args": {"id": "main", "command": "cmd 2"}, "result": "out"}],
                 "parse_error_recorded": False}


def test_history_is_the_first_two_and_last_two_turns_once_with_the_assistant_text_omitted():
    records = [record(k, ["r"]) for k in range(6)]
    assert [r["turn_idx"] for r in select_history(records)] == [0, 1, 4, 5]
    assert [r["turn_idx"] for r in select_history(records[:3])] == [0, 1, 2]
    assert [r["turn_idx"] for r in select_history(records, "last")] == [3, 4, 5]
    assert all(r["assistant_text"] == "[OMITTED]" for r in select_history(records))
    assert records[0]["assistant_text"] == "thinking"  # the records themselves are not changed
    with pytest.raises(ValueError, match="head_tail or last"):
        select_history(records, "random")


def test_the_judge_sees_json_with_results_cut_at_head_and_tail_and_the_rubric():
    long = "A" * 5000 + "MIDDLE" + "Z" * 5000
    messages = judge_messages("count the lines", [record(0, ["short"])], record(1, [long]))
    user = messages[1]["content"]
    payload, _ = json.JSONDecoder().raw_decode(user)
    result = payload["current"]["tool_results"][0]["result"]
    assert result.startswith("A" * 100) and result.endswith("Z" * 100) and "MIDDLE" not in result
    assert len(result) < RESULT_CHARS + 100 and "characters omitted" in result
    assert payload["task_instruction"] == "count the lines" and payload["history"][0]["tool_results"][0]["result"] == "short"
    assert user.rstrip().endswith("\\boxed{1} or \\boxed{-1}.") and messages[0]["role"] == "system"


@pytest.mark.parametrize("results, parse_errors, expected", [
    (["file1\nfile2"], 0, 0.0),  # clean, but no look at the state was taken: no evidence of progress
    (["Command finished with no output."], 0, 0.0),
    (["ok", "[TOOL_ERROR] shell_exec: argument 'id' must be a string"], 0, -1.0),
    (["Command finished with no output (exit status 2)."], 0, -1.0),
    (["partial\n[The command is still running after 20 s; it goes on in session 'main'. ...]"], 0, -1.0),
    (["file1"], 1, -1.0),
    ([], 1, -1.0),
    ([], 0, None),  # the final answer: left to the tests
])
def test_the_rule_judge_scores_what_the_environment_answered(results, parse_errors, expected):
    judge = TerminalRuleJudge()
    score = asyncio.run(judge.score_turn("task", [record(0, results, parse_errors)]))
    assert score == expected
    assert judge.stats == {"steps": 1, "unjudged_steps": int(expected is None)}


def _tracked(before, after, seen=(), results=("ok",)):
    rec = record(0, list(results), 0)
    rec["state"], rec["states_seen"] = (before, after), tuple(seen)
    return rec


@pytest.mark.parametrize("before, after, expected", [
    (0.0, 0.5, 1.0),   # the hidden tests' share rose on the host's copy of /app
    (0.5, 0.25, -1.0),  # it fell
    (0.5, 0.5, 0.0),   # unchanged (a read-only look, or a change the tests do not see): no credit twice
])
def test_the_rule_judge_scores_the_change_of_the_host_observed_test_share(before, after, expected):
    judge = TerminalRuleJudge()
    rec = _tracked({"fingerprint": "a", "progress": before}, {"fingerprint": "b", "progress": after}, seen=("a",))
    assert asyncio.run(judge.score_turn("task", [rec])) == expected


def test_printed_success_earns_nothing_and_going_back_and_forth_nets_zero():
    judge = TerminalRuleJudge()
    # an agent that prints "42 passed" and "exit status 0" without changing anything: the share did not move
    rec = _tracked({"fingerprint": "a", "progress": 0.0}, {"fingerprint": "a", "progress": 0.0}, seen=("a",),
                   results=("===== 42 passed in 0.1s =====\n[The command finished with exit status 0.]",))
    assert asyncio.run(judge.score_turn("task", [rec])) == 0.0
    shares = [0.0, 1.0, 0.0, 1.0, 0.0]
    scores = [asyncio.run(judge.score_turn("task", [_tracked({"fingerprint": str(i), "progress": a},
                                                             {"fingerprint": str(i + 1), "progress": b})]))
              for i, (a, b) in enumerate(zip(shares, shares[1:]))]
    assert scores == [1.0, -1.0, 1.0, -1.0] and sum(scores) == 0


def test_without_the_test_share_only_a_state_not_seen_before_earns_and_only_once():
    judge = TerminalRuleJudge()
    new = _tracked({"fingerprint": "a", "progress": None}, {"fingerprint": "b", "progress": None}, seen=("a",))
    again = _tracked({"fingerprint": "c", "progress": None}, {"fingerprint": "b", "progress": None}, seen=("a", "b", "c"))
    assert asyncio.run(judge.score_turn("task", [new])) == 1.0
    assert asyncio.run(judge.score_turn("task", [again])) == 0.0


def test_the_llm_judge_is_not_shown_the_harness_facts():
    rec = _tracked({"fingerprint": "a", "progress": 0.0}, {"fingerprint": "b", "progress": 1.0}, seen=("a",))
    user = judge_messages("task", [rec], rec)[1]["content"]
    assert "fingerprint" not in user and "states_seen" not in user and "\"state\"" not in user
