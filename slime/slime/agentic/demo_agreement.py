"""How well does a policy fit its demonstrations' decisions? Greedy replies to demonstration rows, call by call.

    python -m slime.agentic.demo_agreement --model PATH_OR_NAME --rows sft_demos.jsonl [--count 30] [--seed 1]

A warm start's per-token SFT loss says little about its decisions: most tokens of an agent's action are format the
model copies, and the few that decide (which action, which key, which element) carry the loss. This reads rows of an
SFT demonstration file (`gui-rl/gui_demonstrations.py`, `terminal-rl/terminal_demonstrations.py`: a `prompt` of
messages, the demonstrated reply in `metadata.segments`, the tools in `metadata.tools`), lets the model answer each
prompt greedily, and compares the tool calls: `exact` (same tool and arguments), `kind` (same tool and the same
`action` argument, e.g. a computer_use left_click at another point), `wrong`, or `unparsed` (no single well-formed
call). Minutes on a CPU where a desktop evaluation takes tens of them; it measures fitting, not success (demonstration
rows are on the clean path the policy may not stay on).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

from slime.agentic.agent_loop import parse_tool_calls

VERDICTS = ("exact", "kind", "wrong", "unparsed")


def single_call(text: str) -> dict | None:
    """The one well-formed tool call of a reply as {"name", "arguments"}; None when there is none, several, or a
    malformed block."""
    parsed = parse_tool_calls(text)
    if parsed.errors or len(parsed.calls) != 1:
        return None
    return {"name": parsed.calls[0].name, "arguments": parsed.calls[0].arguments}


def compare(reply: str, demonstrated: str) -> str:
    """One of VERDICTS for a reply against the demonstrated reply (which must hold one call)."""
    want = single_call(demonstrated)
    if want is None:
        raise ValueError(f"the demonstrated reply holds no single well-formed tool call: {demonstrated[:200]!r}")
    got = single_call(reply)
    if got is None:
        return "unparsed"
    if got == want:
        return "exact"
    if got["name"] == want["name"] and got["arguments"].get("action") == want["arguments"].get("action"):
        return "kind"
    return "wrong"


def demonstrated_reply(row: dict) -> str:
    segments = (row.get("metadata") or {}).get("segments") or []
    trained = [s["text"] for s in segments if s.get("loss", 1)]
    if not trained:
        raise ValueError("a demonstration row without a trained segment (metadata.segments)")
    return "".join(trained)


def pick_rows(path: Path, count: int, seed: int) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return random.Random(seed).sample(rows, min(count, len(rows)))


def summarize(verdicts: list[str]) -> str:
    counts = Counter(verdicts)
    n = len(verdicts)
    # "kind" counts the exact ones too: the right action, whatever its arguments
    return (f"exact {counts['exact']}/{n}, right action kind {counts['exact'] + counts['kind']}/{n}, "
            f"wrong {counts['wrong']}/{n}, unparsed {counts['unparsed']}/{n}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a model folder or a name the registry knows")
    parser.add_argument("--rows", type=Path, required=True, help="an SFT demonstration file (jsonl)")
    parser.add_argument("--count", type=int, default=30, help="rows drawn (without replacement)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--json", type=Path, help="also write every row's verdict, reply and demonstration here")
    opts = parser.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from slime.models.registry import resolve_model_path

    path = resolve_model_path(opts.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    records = []
    for i, row in enumerate(pick_rows(opts.rows, opts.count, opts.seed), 1):
        ids = tokenizer.apply_chat_template(row["prompt"], tools=(row.get("metadata") or {}).get("tools"),
                                            add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=opts.max_new_tokens, do_sample=False)
        reply = tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
        demonstrated = demonstrated_reply(row)
        verdict = compare(reply, demonstrated)
        meta = row.get("metadata") or {}
        records.append({"task": meta.get("task"), "turn": meta.get("turn"), "verdict": verdict,
                        "reply": reply, "demonstrated": demonstrated})
        print(f"[{i}/{opts.count}] {meta.get('task')} turn {meta.get('turn')}: {verdict} | demonstrated "
              f"{json.dumps(single_call(demonstrated)['arguments'])} | reply "
              f"{json.dumps((single_call(reply) or {}).get('arguments'))}", flush=True)
    if opts.json:
        opts.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    print(summarize([r["verdict"] for r in records]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
