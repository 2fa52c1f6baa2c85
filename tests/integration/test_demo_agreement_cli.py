"""`python -m slime.agentic.demo_agreement` end to end on the tiny Qwen2 model: rows drawn, greedy replies, verdicts
written and summed up."""
import json

from slime.agentic.demo_agreement import main

CALL = "Action: x\n<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": {"action": "left_click",
                                                                                     "coordinate": [59, 731]}}) \
    + "\n</tool_call>"


def test_the_cli_runs_a_model_over_drawn_rows(tmp_path, capsys):
    rows = tmp_path / "demos.jsonl"
    tools = [{"type": "function", "function": {"name": "computer_use", "parameters": {"type": "object"}}}]
    rows.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"screen {i}"}],
                                        "metadata": {"tools": tools, "task": f"t/{i}", "turn": 0,
                                                     "segments": [{"text": CALL, "loss": 1}]}}) + "\n"
                            for i in range(3)))
    out = tmp_path / "verdicts.json"
    assert main(["--model", "tiny-qwen2", "--rows", str(rows), "--count", "2", "--max-new-tokens", "8",
                 "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert len(records) == 2 and {r["task"] for r in records} <= {"t/0", "t/1", "t/2"}
    assert all(r["verdict"] in ("exact", "kind", "wrong", "unparsed") for r in records)
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("exact ")
