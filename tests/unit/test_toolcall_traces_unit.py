"""The programs the SFT traces call the tool with, written from the problem text of each reasoning-gym generator:
checked here by running them in this interpreter against the labels of the shipped training problems (the
sandboxed, end-to-end check is tests/integration/test_toolcall_traces.py), and the shipped trace file's layout."""

from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from generate_with_retool import SYSTEM_PROMPT, format_observation, parse_action
from toolcall_data import answers_match
from toolcall_traces import SOLVERS, answer_text, solution_code, tool_call_text

REPO = Path(__file__).resolve().parents[2]
TRAIN = [json.loads(line) for line in (REPO / "toolcall-rl/data/train.jsonl").read_text().splitlines()]
TRACES = [json.loads(line) for line in (REPO / "toolcall-rl/data/sft_traces.jsonl").read_text().splitlines()]


def _printed(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<solution>", "exec"), {})  # noqa: S102 - our own generated programs
    return out.getvalue().strip()


@pytest.mark.parametrize("source", sorted(SOLVERS))
def test_each_generator_has_a_program_that_prints_the_label(source):
    rows = [r for r in TRAIN if r["source"] == source][:5]
    assert rows, source
    for row in rows:
        code = solution_code(source, row["prompt"])
        assert code is not None, row["prompt"]
        assert answers_match(_printed(code), row["label"]), (row["prompt"], code)


def test_unknown_problems_get_no_program():
    assert solution_code("gsm_symbolic", "Tom has 3 apples.") is None
    assert solution_code("gcd", "no numbers here") is None


def test_a_call_parses_as_the_loop_parses_it():
    action = parse_action(tool_call_text("import math\nprint(math.gcd(4, 6))"))
    assert action.kind == "tool" and action.arguments == {"code": "import math\nprint(math.gcd(4, 6))"}
    assert parse_action(answer_text("13/56")).answer == "13/56"


def test_the_shipped_traces():
    assert len(TRACES) == 600 and Counter(t["metadata"]["kind"] for t in TRACES) == {"tool": 300, "direct": 300}
    train_ids = {r["id"]: r for r in TRAIN}
    for trace in TRACES:
        assert trace["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert trace["prompt"][1]["content"] == train_ids[trace["id"]]["prompt"] and trace["label"] == train_ids[trace["id"]]["label"]
        segments = trace["metadata"]["segments"]
        if trace["metadata"]["kind"] == "direct":
            assert segments == [{"text": answer_text(trace["label"]), "loss": 1}]
            continue
        call, observation, answer = segments
        assert (call["loss"], observation["loss"], answer["loss"]) == (1, 0, 1)
        printed = observation["text"].split("<interpreter>\n", 1)[1].rsplit("\n</interpreter>", 1)[0]
        assert observation["text"] == format_observation(printed) and answer["text"] == answer_text(printed)
        assert parse_action(call["text"]).arguments["code"] == solution_code(trace["source"], trace["prompt"][1]["content"])
        assert answers_match(printed, trace["label"])
