"""Tool-use traces for the SFT warm start of tool-call RL (upstream trains its ReTool policy from an SFT checkpoint).

    python toolcall-rl/toolcall_traces.py --problems toolcall-rl/data/train.jsonl \\
        --out toolcall-rl/data/sft_traces.jsonl --n 600 --direct-share 0.5 --seed 0

For a problem of a known generator (`source`), a short program that solves it is written from the problem text
(`solution_code`), run in the sandbox the RL loop uses, and kept only if what it printed equals the label by value
(`answers_match`). The trace is the loop's own layout: the system prompt that declares the tools and the problem as
the prompt; then one `<tool_call>` step, the sandbox's output as the `<interpreter>` observation (loss 0), and
`Answer: \\boxed{…}` with the printed value. A share of the problems (`--direct-share`) are written as a direct
answer instead, `Answer: \\boxed{<label>}` without a call, as a model that skips its tool would: the warm-started
policy then calls the tool on some problems and guesses on others, so RL has a behaviour to reinforce (calling
the tool pays) rather than one to discover. Every trace is correct; none is written from a template of the answer.

Rows (the SFT rollout's format, `slime.rollout.sft_rollout`): `{"prompt": [system, user], "label", "source", "id",
"metadata": {"tools": [schemas], "segments": [{"text", "loss"}, ...], "kind": "tool"|"direct"}}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
from pathlib import Path
from typing import Callable

import generate_with_retool as toolcall

_INT = r"-?\d+"


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(_INT, text)]


def _after(marker: str, text: str) -> str | None:
    at = text.find(marker)
    return None if at < 0 else text[at + len(marker):]


def _basic_arithmetic(problem: str) -> str | None:
    expression = _after("Calculate ", problem)
    return None if expression is None else f"print({expression.strip().rstrip('.').strip()})"


def _products(problem: str) -> str | None:
    match = re.search(r"multiplication:\s*([\d\s*]+?)\.", problem)
    return None if match is None else f"print({match.group(1).strip()})"


def _gcd(problem: str) -> str | None:
    numbers = _numbers(_after("numbers:", problem) or "")
    return f"import math\nprint(math.gcd({', '.join(map(str, numbers))}))" if len(numbers) >= 2 else None


def _lcm(problem: str) -> str | None:
    numbers = _numbers(_after("numbers:", problem) or "")
    return f"import math\nprint(math.lcm({', '.join(map(str, numbers))}))" if len(numbers) >= 2 else None


def _count_primes(problem: str) -> str | None:
    match = re.search(r"between (\d+) and (\d+)", problem)
    if match is None:
        return None
    low, high = match.groups()
    return f"from sympy import primerange\nprint(len(list(primerange({low}, {high} + 1))))"


def _count_bits(problem: str) -> str | None:
    match = re.search(r"number (\d+)", problem)
    return None if match is None else f"print(bin({match.group(1)}).count('1'))"


def _fraction_simplification(problem: str) -> str | None:
    match = re.search(r"fraction \$?(\d+)\s*/\s*(\d+)", problem)
    return None if match is None else f"from fractions import Fraction\nprint(Fraction({match.group(1)}, {match.group(2)}))"


def _dice(problem: str) -> str | None:
    sides = [int(s) for s in re.findall(r"1d(\d+)", problem.split("(Assume")[0])]
    target = re.search(r"rolling (\d+) or higher", problem)
    if not sides or target is None:
        return None
    return ("from fractions import Fraction\nfrom itertools import product\n"
            f"rolls = list(product(*[range(1, s + 1) for s in {sides}]))\n"
            f"print(Fraction(sum(sum(r) >= {target.group(1)} for r in rolls), len(rolls)))")


def _decimal_arithmetic(problem: str) -> str | None:
    match = re.search(r"\n(.+?)\s*=\s*\?", problem)
    if match is None:
        return None
    return ("from decimal import Decimal, getcontext, ROUND_HALF_UP\n"
            "getcontext().prec = 12\ngetcontext().rounding = ROUND_HALF_UP\n"
            f"x = Decimal(str({match.group(1).strip()}))\nprint(+x)")


def _simple_equations(problem: str) -> str | None:
    match = re.search(r"(?:value of (\w) (?:that satisfies|in the equation)|Solve for (\w)):\s*(.+?)\s*=\s*(.+)$",
                      problem.strip())
    if match is None:
        return None
    var = match.group(1) or match.group(2)
    left, right = match.group(3), match.group(4)
    return (f"from sympy import Eq, solve, symbols\n{var} = symbols('{var}')\n"
            f"print(solve(Eq({left}, {right.strip().rstrip('.')}), {var})[0])")


SOLVERS: dict[str, Callable[[str], str | None]] = {
    "basic_arithmetic": _basic_arithmetic, "products": _products, "gcd": _gcd, "lcm": _lcm,
    "count_primes": _count_primes, "count_bits": _count_bits, "fraction_simplification": _fraction_simplification,
    "dice": _dice, "decimal_arithmetic": _decimal_arithmetic, "simple_equations": _simple_equations,
}


def solution_code(source: str, problem: str) -> str | None:
    """A Python program that prints the answer to `problem` (a `source` generator's text), or None."""
    solver = SOLVERS.get(source)
    return solver(problem) if solver else None


def tool_call_text(code: str) -> str:
    """One call of the code interpreter in the Qwen format the system prompt advertises."""
    return "<tool_call>\n" + json.dumps({"name": "code_interpreter", "arguments": {"code": code}}) + "\n</tool_call>"


def answer_text(answer: str) -> str:
    return f"Answer: \\boxed{{{answer}}}"


async def build_trace(row: dict, direct: bool, timeout: float = 30.0) -> dict | None:
    """The SFT row of one problem, or None when no verified trace can be written for it."""
    from toolcall_data import answers_match

    interpreter = toolcall.load_tools(None)[0]  # the default tool set: code_interpreter alone
    messages = [{"role": "system", "content": toolcall.SYSTEM_PROMPT}, {"role": "user", "content": row["prompt"]}]
    label = str(row["label"])
    if direct:
        segments = [{"text": answer_text(label), "loss": 1}]
    else:
        code = solution_code(row.get("source", ""), row["prompt"])
        if code is None:
            return None
        said, ok, _ = await toolcall.run_tool(interpreter, {"code": code}, timeout)
        printed = said.strip()
        if not ok or "\n" in printed or not await asyncio.to_thread(answers_match, printed, label):
            return None
        segments = [{"text": tool_call_text(code), "loss": 1},
                    {"text": toolcall.format_observation(said), "loss": 0},
                    {"text": answer_text(printed), "loss": 1}]
    return {"prompt": messages, "label": label, "source": row.get("source"), "id": row.get("id"),
            "metadata": {"tools": [interpreter.schema], "segments": segments, "kind": "direct" if direct else "tool"}}


async def build_traces(rows: list[dict], n: int, direct_share: float, seed: int, concurrency: int = 4) -> list[dict]:
    """`n` verified traces from `rows` (shuffled with `seed`): the first `direct_share` of them direct answers, the
    rest tool traces from the following problems whose program printed the label (others are skipped)."""
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    n_direct = round(n * direct_share)
    direct = [await build_trace(rows[i], direct=True) for i in order[:n_direct]]
    semaphore = asyncio.Semaphore(concurrency)

    async def verified(index: int):
        async with semaphore:
            return await build_trace(rows[index], direct=False)

    with_tool: list[dict] = []
    candidates = order[n_direct:]
    while len(with_tool) < n - n_direct and candidates:
        batch, candidates = candidates[: 2 * (n - n_direct - len(with_tool))], candidates[2 * (n - n_direct - len(with_tool)):]
        with_tool += [t for t in await asyncio.gather(*(verified(i) for i in batch)) if t is not None]
    if len(with_tool) < n - n_direct:
        raise RuntimeError(f"only {len(with_tool)} of {n - n_direct} tool traces could be verified from {len(rows)} problems")
    # interleaved as the problems were drawn, so that every batch of the SFT run mixes both kinds
    traces = direct + with_tool[: n - n_direct]
    random.Random(seed + 1).shuffle(traces)
    return traces


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write verified tool-use traces for the SFT warm start.")
    parser.add_argument("--problems", type=Path, required=True, help="problem JSONL (toolcall-rl/data/train.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--direct-share", type=float, default=0.5,
                        help="share of traces that answer directly without calling the tool")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not 0.0 <= args.direct_share <= 1.0:
        parser.error("--direct-share must be in [0, 1]")
    rows = [json.loads(line) for line in args.problems.read_text(encoding="utf-8").splitlines() if line.strip()]
    traces = asyncio.run(build_traces(rows, args.n, args.direct_share, args.seed))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for trace in traces:
            fh.write(json.dumps(trace, ensure_ascii=False) + "\n")
    tmp.replace(args.out)
    kinds = {k: sum(t["metadata"]["kind"] == k for t in traces) for k in ("tool", "direct")}
    print(f"{args.out}: {len(traces)} traces ({kinds['tool']} with a verified tool call, {kinds['direct']} direct)")


if __name__ == "__main__":
    main()
