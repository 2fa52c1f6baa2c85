"""Data for tool-call RL (ReTool-style maths with a Python tool): problems, a loader, and answer checking.

* `generate(out_dir, n_train, n_heldout, seed)` writes `train.jsonl` and `heldout.jsonl` in the upstream
  format, one problem a line: `{"prompt": <problem text>, "label": <answer string>}` plus our own keys
  `source` (the reasoning-gym generator), `id` and `split`. The problems come offline from `reasoning-gym`
  (PyPI, Apache-2.0) with fixed seeds, from generators where a Python tool genuinely helps (big-number
  arithmetic, gcd/lcm, prime counting, bit counting, exact fractions, dice probabilities, GSM8K-style word
  problems); every label is one canonical value (an integer, `a/b` or a decimal). The held-out split is drawn
  with different seeds and deduplicated against train by text. Deterministic: the same arguments (and package
  versions) give the same bytes. CLI: `python toolcall-rl/toolcall_data.py --out toolcall-rl/data [--seed 0]`.
* `load_problems(path)` loads ANY JSONL of maths problems: our rows, `{"question", "answer"}` rows (a GSM8K
  `answer` is cut after its `####`), and DAPO-style rows (`{"prompt": [{"role": "user", "content": ...}],
  "reward_model": {"ground_truth": ...}}`, which upstream's `rl_data_preprocess.py` flattened the same way).
  A bad line raises `ValueError` naming the file and line. CLI: `--check FILE`.
* `answers_match(predicted, label)`: where upstream compared the `\\boxed{}` content with the label exactly as
  strings, we compare values with `math-verify` (PyPI), so `\\frac{1}{2}`, `0.5`, `1/2` and `\\boxed{1/2}`
  agree, `1,234`/`1234.0`/`1234` agree, and garbage does not match. Plain numbers are decided in pure Python;
  everything else goes to math-verify in a helper process that is killed when it overruns the timeout (a
  prediction like `9^{9^{9^9}}` makes sympy hang, and math-verify's own timeout uses `signal.alarm`, which
  raises off the main thread), so it is safe from any thread of an asyncio rollout.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import logging
import math
import os
import random
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from slime.rollout.data_source import iter_jsonl_objects

logger = logging.getLogger(__name__)

# ==================================================================================================
# problem generation (reasoning-gym)
# ==================================================================================================

MAX_PROMPT_CHARS = 600  # keep problems short enough for a small model's context
TESTED_VERSIONS = {"reasoning-gym": "0.1.25", "math-verify": "0.9.0"}


@dataclass(frozen=True)
class Kind:
    """One reasoning-gym generator in the mix: its share of each split and its config overrides."""

    name: str
    weight: float
    config: dict[str, Any] = field(default_factory=dict)
    # at most this share of the kind's rows may carry the same label (gcd of random numbers is 1 or 2 in
    # two thirds of the draws: a policy could learn to guess); None = no cap
    max_label_share: float | None = None


# Kinds where a Python tool genuinely helps (exact big-number arithmetic, number theory, enumeration), with
# answers that are one canonical value. Left out on purpose: prime_factorization (the answer is a list of
# factors, "2 × 2 × 5"), bitwise_arithmetic (hex answers), power_function (3 significant figures in e-notation),
# leg_counting (needs animal facts, not computation), polynomial_equations (several roots).
KINDS: tuple[Kind, ...] = (
    Kind("gsm_symbolic", 0.20),  # GSM8K-style word problems (GSM-Symbolic templates), integer answers
    Kind("basic_arithmetic", 0.12, {"min_terms": 3, "max_terms": 5, "min_digits": 2, "max_digits": 4}),
    Kind("products", 0.08, {"min_terms": 2, "max_terms": 3, "min_digits": 3, "max_digits": 5}),
    Kind("gcd", 0.08, {"min_numbers": 2, "max_numbers": 3, "min_value": 100, "max_value": 100_000},
         max_label_share=0.05),
    Kind("lcm", 0.08, {"min_numbers": 2, "max_numbers": 3, "min_value": 10, "max_value": 1000}),
    Kind("count_primes", 0.08),  # primes in a range up to 10,000
    Kind("count_bits", 0.08, max_label_share=0.06),  # set bits of a number up to 2^31 (binomial: 16 is 14%)
    Kind("fraction_simplification", 0.08, {"styles": ("plain",)}),  # answer "a/b"
    Kind("dice", 0.07),  # probability of a sum over 4 dice, as a reduced fraction
    Kind("decimal_arithmetic", 0.07),  # 3-decimal operands, 12 significant digits
    Kind("simple_equations", 0.06),  # linear equation, integer solution
)

_CANONICAL_LABEL = re.compile(r"-?\d+(?:/\d+|\.\d+)?")
_DATASET_SIZE = 100_000  # reasoning-gym items are generated lazily from Random(seed + index): a large upper bound


def _derived_seed(*parts: Any) -> int:
    """A 32-bit seed from the parts, the same in every process (no hash randomisation)."""
    digest = hashlib.sha256(":".join(str(p) for p in ("toolcall_data", *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _allocate(n: int, kinds: tuple[Kind, ...]) -> dict[str, int]:
    """Split n rows over the kinds by weight (largest remainder; ties to the earlier kind)."""
    total = sum(k.weight for k in kinds)
    exact = [n * k.weight / total for k in kinds]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(kinds)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return {k.name: c for k, c in zip(kinds, counts)}


def _text_key(text: str) -> str:
    return " ".join(text.lower().split())


def _exact_eval(expression: str) -> Fraction:
    """Value of an arithmetic expression (+ - * / unary minus, integers) with true division, exactly."""
    import ast

    def ev(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            return a / b
        raise ValueError(f"unexpected node {ast.dump(node)}")

    return ev(ast.parse(expression, mode="eval"))


def _reject_reason(kind: Kind, ds: Any, entry: dict) -> str | None:
    question, answer = entry["question"], entry["answer"]
    if len(question) >= MAX_PROMPT_CHARS:
        return "too_long"
    if not isinstance(answer, str) or not _CANONICAL_LABEL.fullmatch(answer):
        return "non_canonical_label"
    if ds.score_answer(answer, entry) != 1.0:
        return "scorer_disagrees"
    if kind.name == "basic_arithmetic":
        # reasoning-gym computes "/" as floor division; about 1% of its expressions do not divide evenly, so
        # Python's true division (what the model's tool call computes) gives another value: drop those
        try:
            if _exact_eval(entry["metadata"]["expression"]) != Fraction(int(answer)):
                return "inexact_division"
        except (ValueError, ZeroDivisionError, SyntaxError, KeyError):
            return "inexact_division"
    return None


def _draw(kind: Kind, n: int, rg_seed: int, taken: set[str]) -> tuple[list[dict], dict[str, int]]:
    """n problems of one kind from reasoning-gym seed `rg_seed`, skipping texts in `taken` (updated)."""
    import reasoning_gym

    ds = reasoning_gym.create_dataset(kind.name, seed=rg_seed, size=_DATASET_SIZE, **kind.config)
    cap = None if kind.max_label_share is None else max(2, math.ceil(kind.max_label_share * n))
    per_label: dict[str, int] = {}
    rejected: dict[str, int] = {}
    rows: list[dict] = []
    for idx in range(_DATASET_SIZE):
        if len(rows) == n:
            break
        entry = ds[idx]
        reason = _reject_reason(kind, ds, entry)
        key = _text_key(entry["question"])
        if reason is None and key in taken:
            reason = "duplicate"
        if reason is None and cap is not None and per_label.get(entry["answer"], 0) >= cap:
            reason = "label_cap"
        if reason is not None:
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        taken.add(key)
        per_label[entry["answer"]] = per_label.get(entry["answer"], 0) + 1
        rows.append({"prompt": entry["question"], "label": entry["answer"], "source": kind.name})
    if len(rows) < n:
        raise RuntimeError(f"{kind.name}: only {len(rows)} of {n} problems after {_DATASET_SIZE} draws ({rejected})")
    return rows, rejected


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("reasoning-gym", "math-verify"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "missing"
    return out


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    os.replace(tmp, path)


# `gsm_symbolic` is left out of the default mix: reasoning-gym wrote it from the templates of Apple's GSM-Symbolic,
# templated GSM8K test problems published under CC-BY-NC-ND-4.0, which a checked-in, redistributed derivative must
# not rest on (and GSM8K test problems must not end up in training data anyway). `--include-gsm-symbolic` adds it.
LICENCE_RESTRICTED = ("gsm_symbolic",)
DEFAULT_KINDS = tuple(k for k in KINDS if k.name not in LICENCE_RESTRICTED)


def generate(
    out_dir: str | Path,
    n_train: int = 2000,
    n_heldout: int = 200,
    seed: int = 0,
    kinds: tuple[Kind, ...] = DEFAULT_KINDS,
) -> dict[str, Any]:
    """Write `train.jsonl` and `heldout.jsonl` under out_dir; return a summary (paths, counts per kind, rejections).

    Each (split, kind) draws from its own reasoning-gym seed, derived from `seed`; the rows of a split are
    shuffled with a seed of their own, and ids are `<split>-<5 digits>` in file order.
    """
    if n_train < 0 or n_heldout < 0:
        raise ValueError("n_train and n_heldout must be >= 0")
    versions = _versions()
    for dist, tested in TESTED_VERSIONS.items():
        if versions.get(dist) != tested:
            logger.warning("%s %s installed; the checked-in data were made with %s", dist, versions.get(dist), tested)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()  # problem texts already used: train first, so held-out is disjoint from it
    summary: dict[str, Any] = {"seed": seed, "versions": versions}
    for split, n in (("train", n_train), ("heldout", n_heldout)):
        rows: list[dict] = []
        rejected: dict[str, dict[str, int]] = {}
        counts = _allocate(n, kinds)
        for kind in kinds:
            if counts[kind.name] == 0:
                continue
            got, rej = _draw(kind, counts[kind.name], _derived_seed(seed, split, kind.name), taken)
            rows.extend(got)
            if rej:
                rejected[kind.name] = rej
        random.Random(_derived_seed(seed, split, "shuffle")).shuffle(rows)
        path = out / f"{split}.jsonl"
        _write_jsonl(path, ({**r, "id": f"{split}-{i:05d}", "split": split} for i, r in enumerate(rows)))
        summary[split] = {"path": str(path), "rows": len(rows), "bytes": path.stat().st_size, "counts": counts,
                          "rejected": rejected}
    return summary


# ==================================================================================================
# loading any JSONL of problems
# ==================================================================================================

_PROMPT_KEYS = ("prompt", "question", "problem")
_LABEL_KEYS = ("label", "answer")


def _prompt_text(value: Any, where: str) -> str:
    if isinstance(value, list):  # chat messages (DAPO: [{"role": "user", "content": ...}])
        if not value:
            raise ValueError(f"{where}: 'prompt' is an empty message list")
        users = [m for m in value if isinstance(m, dict) and m.get("role", "user") == "user"]
        if not users:
            raise ValueError(f"{where}: 'prompt' is a message list without a user message")
        value = users[0].get("content")
        if isinstance(value, list):  # OpenAI content parts
            value = "".join(p.get("text", "") for p in value if isinstance(p, dict))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: the prompt must be a non-empty string (or a message list), got {value!r:.80}")
    return value


def _label_text(value: Any, where: str, key: str) -> str:
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{where}: '{key}' must be a string or a number, got {value!r}")
    if isinstance(value, int):
        value = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: '{key}' is {value!r}")
        value = str(int(value)) if value.is_integer() else repr(value)
    elif isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, int, float)):
        return _label_text(value[0], where, key)
    if not isinstance(value, str):
        raise ValueError(f"{where}: '{key}' must be a string or a number, got {type(value).__name__}")
    if key == "answer" and "####" in value:  # GSM8K: worked solution, then "#### 72"
        value = value.rsplit("####", 1)[1].strip().replace(",", "")
    value = value.strip()
    if not value:
        raise ValueError(f"{where}: '{key}' is empty")
    return value


def load_problems(path: str | Path) -> list[dict]:
    """Problems from a JSONL file as dicts with `prompt` (str), `label` (str), `id`, `source`, `split`.

    Accepted rows: `{"prompt": str, "label": str|number}` (ours and upstream's), `{"question", "answer"}`
    (GSM8K's `#### 72` answers included), `{"problem", "answer"}`, and DAPO-style
    `{"prompt": [{"role": "user", "content": ...}], "reward_model": {"ground_truth": ...}}` (the first user
    message is the prompt). Other keys are kept as they are. `id` defaults to `<file stem>-<line>`, `source`
    to the file stem (DAPO's `data_source` if present), `split` to None. Blank lines are skipped. Raises
    ValueError naming the file and line for a row that is not JSON, not an object, lacks a prompt or a label,
    or repeats an id; and for a file without problems.
    """
    path = Path(path)
    problems: list[dict] = []
    seen_ids: dict[str, int] = {}
    for lineno, row in iter_jsonl_objects(path):
        where = f"{path}:{lineno}"
        prompt_key = next((k for k in _PROMPT_KEYS if k in row), None)
        if prompt_key is None:
            raise ValueError(f"{where}: no prompt: expected one of {', '.join(_PROMPT_KEYS)} (keys: {sorted(row)})")
        prompt = _prompt_text(row[prompt_key], where)
        label_key = next((k for k in _LABEL_KEYS if k in row), None)
        if label_key is not None:
            label = _label_text(row[label_key], where, label_key)
        elif isinstance(row.get("reward_model"), dict) and "ground_truth" in row["reward_model"]:
            label = _label_text(row["reward_model"]["ground_truth"], where, "reward_model.ground_truth")
        else:
            expected = "'label', 'answer' or 'reward_model.ground_truth'"
            raise ValueError(f"{where}: no label: expected {expected} (keys: {sorted(row)})")
        problem = {
            "prompt": prompt,
            "label": label,
            "id": str(row["id"]) if row.get("id") is not None else f"{path.stem}-{lineno}",
            "source": str(row.get("source") or row.get("data_source") or path.stem),
            "split": row.get("split"),
        }
        problem.update((k, v) for k, v in row.items() if k not in problem and k not in (prompt_key, label_key))
        if problem["id"] in seen_ids:
            raise ValueError(f"{where}: id {problem['id']!r} already used on line {seen_ids[problem['id']]}")
        seen_ids[problem["id"]] = lineno
        problems.append(problem)
    if not problems:
        raise ValueError(f"{path}: no problems (empty file)")
    return problems


# ==================================================================================================
# answer checking (math-verify)
# ==================================================================================================

DEFAULT_TIMEOUT_S = 5.0
_MAX_FAST_CHARS = 200
_WORDS = re.compile(r"[A-Za-z][A-Za-z .'-]*")  # a word label ("Friday", "Yes"): math-verify reads it as a product
_MATH_WORDS = {"e", "i", "pi", "inf", "infty", "infinity", "oo"}
_PROSE = re.compile(r"[A-Za-z]{3,}\s+[A-Za-z]{2,}")
_GROUPED = re.compile(r"(\d{1,3})((?:,\d{3})+|(?: \d{3})+|(?:_\d{3})+)(\.\d+)?")
_PLAIN = re.compile(r"(\d+\.?\d*|\.\d+)")
_SCI = re.compile(r"(\d+\.?\d*|\.\d+)[eE]([+-]?\d{1,3})")
_SLASH = re.compile(r"(-?\d+)\s*/\s*(-?\d+)")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\{\s*(-?\d+)\s*\}\{\s*(-?\d+)\s*\}")


def _unwrap_braced(s: str, prefix: str) -> str | None:
    """The content when the WHOLE of s is `prefix{...}` with balanced braces, else None."""
    if not s.startswith(prefix + "{") or not s.endswith("}"):
        return None
    depth = 0
    for i in range(len(prefix), len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return s[len(prefix) + 1 : -1] if i == len(s) - 1 else None
    return None


def _strip_answer(s: str) -> str:
    """Peel delimiters off an answer: $...$, \\(...\\), \\[...\\], \\boxed{...}, \\text{...}, a final period."""
    s = s.strip().replace("\u2212", "-").replace("\u2009", " ").replace("\u202f", " ")
    for _ in range(8):
        before = s
        for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
            if len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : len(s) - len(right)].strip()
        for prefix in ("\\boxed", "\\fbox", "\\text", "\\mathrm", ""):
            inner = _unwrap_braced(s, prefix)
            if inner is not None:
                s = inner.strip()
        s = s.rstrip(".").strip() if not s.endswith("..") else s
        if s == before:
            break
    return s


def _as_number(s: str) -> tuple[Fraction, bool] | None:
    """(value, exact) for a plain number: integer (with , / space / _ / {,} / \\, thousands separators, or a
    trailing .0), decimal, e-notation, a/b or \\frac{a}{b}; exact is False for decimals. None otherwise."""
    s = _strip_answer(s)
    if len(s) > _MAX_FAST_CHARS:
        return None
    s = s.replace("{,}", ",").replace("\\,", " ").replace("\\!", "").replace("\\ ", " ").strip()
    sign = 1
    if s[:1] in ("+", "-") and s[1:2] != "-":
        sign, s = (-1 if s[0] == "-" else 1), s[1:].strip()
    try:
        if m := _GROUPED.fullmatch(s):
            digits = m.group(1) + re.sub(r"[ ,_]", "", m.group(2)) + (m.group(3) or "")
            return sign * Fraction(digits), m.group(3) is None or not m.group(3).strip(".0")
        if _PLAIN.fullmatch(s):
            value = Fraction(s)
            return sign * value, "." not in s or not s.split(".")[1].strip("0")
        if m := _SCI.fullmatch(s):
            return sign * Fraction(m.group(1)) * Fraction(10) ** int(m.group(2)), False
        if m := (_SLASH.fullmatch(s) or _LATEX_FRAC.fullmatch(s)):
            num, den = int(m.group(1)), int(m.group(2))
            return (sign * Fraction(num, den), True) if den != 0 else None
    except (ValueError, ZeroDivisionError):  # e.g. more than 4300 digits
        return None
    return None


def _normalized(s: str) -> str:
    return re.sub(r"\s+", "", _strip_answer(s)).casefold()


def _math_verify(predicted: str, label: str, timeout_s: int | None) -> bool:
    """math-verify on (predicted, label) in THIS process; timeout_s uses signal.alarm (main thread only)."""
    from math_verify import parse, verify

    def parse_(text: str):
        return parse(text, parsing_timeout=timeout_s)

    gold = parse_(f"${label}$")  # a bare label is LaTeX: "2\\sqrt{2}" would otherwise parse as 2
    if not gold:
        gold = parse_(label)
    if not gold:
        return False
    delimited = any(d in predicted for d in ("\\boxed", "$", "\\(", "\\["))
    if delimited or (_PROSE.search(predicted) and "\\" not in predicted):  # or prose: "The answer is 42."
        pred = parse_(predicted)
    else:  # an extracted answer such as the content of \boxed{}
        pred = parse_(f"${predicted}$") or parse_(predicted)
    if not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=timeout_s))


def answers_match(predicted: str | None, label: str, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether a predicted answer equals the label as a mathematical value (math-verify).

    `predicted` is a final answer, normally the content of the response's last `\\boxed{}` (a `\\boxed{...}`,
    `$...$` or a short sentence also works); `label` is the reference answer. Thread-safe; never raises on
    bad input (None, garbage, unparsable LaTeX give False); a comparison that overruns `timeout` seconds
    is killed and counts as no match.
    """
    if predicted is None or label is None:
        return False
    predicted, label = str(predicted), str(label)
    if not predicted.strip() or not label.strip():
        return False
    if _normalized(predicted) == _normalized(label):
        return True
    bare_label = _strip_answer(label)
    if _WORDS.fullmatch(bare_label) and bare_label.casefold() not in _MATH_WORDS:  # a word answer: text only
        return False
    gold_num = _as_number(label)
    if gold_num is not None:
        if not re.search(r"\d", predicted):
            return False
        pred_num = _as_number(predicted)
        if pred_num is not None:
            if pred_num[0] == gold_num[0]:
                return True
            if pred_num[1] and gold_num[1]:  # both exact (integers or fractions) and different
                return False
            # a decimal on either side: math-verify decides with its rounding tolerance
    return _verify_pool().check(predicted, label, timeout)


# ------------------------------------------------------------------------------------------ the helper process


def _verify_worker_main() -> None:
    """The helper process: one JSON request a line on stdin, one JSON reply a line on stdout."""
    logging.disable(logging.WARNING)  # math-verify warns on every unparsable answer
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write to the protocol stream
    import math_verify  # noqa: F401  (import before saying ready)

    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = {"ok": _math_verify(req["predicted"], req["label"], None)}
        except Exception as e:  # noqa: BLE001  (one bad comparison must not end the helper)
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


class _Worker:
    STARTUP_TIMEOUT_S = 120.0

    def __init__(self) -> None:
        # this folder (the worker imports this module by name) and the folder holding the `slime` package
        import slime

        roots = [str(Path(__file__).resolve().parent), str(Path(slime.__file__).resolve().parents[1])]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(roots + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", "from toolcall_data import _verify_worker_main as m; m()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True,
        )
        self._buf = b""
        reply = self._read_line(time.monotonic() + self.STARTUP_TIMEOUT_S)
        if reply is None or not json.loads(reply).get("ready"):
            self.kill()
            raise RuntimeError(f"math-verify helper process did not start (exit code {self.proc.poll()})")

    def _read_line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:  # the helper died
                    return None
                self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def ask(self, predicted: str, label: str, timeout: float) -> bool | None:
        """True/False, or None when the helper overran the timeout or died (it is then killed)."""
        try:
            self.proc.stdin.write((json.dumps({"predicted": predicted, "label": label}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return None
        line = self._read_line(time.monotonic() + timeout)
        if line is None:
            self.kill()
            return None
        return bool(json.loads(line).get("ok"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # the helper ends at EOF
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _VerifyPool:
    """Up to `max_workers` helper processes shared by all threads; a helper that overruns is killed and a
    fresh one starts on the next call. If no helper can start, math-verify runs in-process (with its
    signal timeout on the main thread, without a timeout elsewhere), with one warning."""

    def __init__(self, max_workers: int = 4) -> None:
        self.max_workers = max_workers
        self._idle: list[_Worker] = []
        self._alive = 0
        self._cond = threading.Condition()
        self._broken: str | None = None
        self.timeouts = 0

    def _acquire(self) -> _Worker | None:
        with self._cond:
            while True:
                if self._broken is not None:
                    return None
                if self._idle:
                    return self._idle.pop()
                if self._alive < self.max_workers:
                    self._alive += 1
                    break
                self._cond.wait()
        try:
            return _Worker()
        except Exception as e:  # noqa: BLE001
            with self._cond:
                self._alive -= 1
                if self._broken is None:
                    self._broken = f"{type(e).__name__}: {e}"
                    logger.warning("answers_match: %s; running math-verify in-process from now on", self._broken)
                self._cond.notify_all()
            return None

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            if worker.alive():
                self._idle.append(worker)
            else:
                self._alive -= 1
            self._cond.notify()

    def check(self, predicted: str, label: str, timeout: float) -> bool:
        worker = self._acquire()
        if worker is None:
            on_main = threading.current_thread() is threading.main_thread()
            try:
                return _math_verify(predicted, label, max(1, math.ceil(timeout)) if on_main else None)
            except Exception:  # noqa: BLE001
                return False
        try:
            result = worker.ask(predicted, label, timeout)
        finally:
            self._release(worker)
        if result is None:
            self.timeouts += 1
            logger.warning("answers_match: math-verify overran %.1fs on %r vs %r; counted as no match",
                           timeout, predicted[:80], label[:80])
            return False
        return result

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
        for w in idle:
            w.close()


_POOL: _VerifyPool | None = None
_POOL_LOCK = threading.Lock()


def _verify_pool() -> _VerifyPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = _VerifyPool()
            atexit.register(_POOL.close)
        return _POOL


# ==================================================================================================
# CLI
# ==================================================================================================


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python toolcall-rl/toolcall_data.py",
        description="Generate tool-call RL maths problems with reasoning-gym, or check a JSONL of problems.",
    )
    parser.add_argument("--out", help="output folder for train.jsonl and heldout.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-train", type=int, default=2000)
    parser.add_argument("--n-heldout", type=int, default=200)
    parser.add_argument("--exclude", default="", metavar="KIND[,KIND]",
                        help=f"leave generators out of the mix (of: {', '.join(k.name for k in KINDS)})")
    parser.add_argument("--include-gsm-symbolic", action="store_true",
                        help="add reasoning-gym's gsm_symbolic word problems (built from GSM-Symbolic's CC-BY-NC-ND-4.0 "
                             "templates of GSM8K test problems: for your own, non-commercial use)")
    parser.add_argument("--check", metavar="FILE", help="load FILE with load_problems and report (no generation)")
    parser.add_argument("--convert", nargs=2, metavar=("IN", "OUT"),
                        help="load IN with load_problems (GSM8K, DAPO, {problem, answer} rows ...) and write OUT in "
                             "the trainer's {prompt, label} format (what --prompt-data reads)")
    args = parser.parse_args(argv)
    if args.check or args.convert:
        source = args.check or args.convert[0]
        try:
            problems = load_problems(source)
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        sources: dict[str, int] = {}
        for p in problems:
            sources[p["source"]] = sources.get(p["source"], 0) + 1
        report = {"file": source, "problems": len(problems), "sources": sources}
        if args.convert:
            out = Path(args.convert[1])
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_name(out.name + ".tmp")
            tmp.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in problems), encoding="utf-8")
            tmp.replace(out)
            report["written"] = str(out)
        print(json.dumps(report, indent=1))
        return 0
    if not args.out:
        parser.error("--out is required (or --check FILE, or --convert IN OUT)")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    excluded = {x.strip() for x in args.exclude.split(",") if x.strip()}
    unknown = excluded - {k.name for k in KINDS}
    if unknown:
        parser.error(f"--exclude: unknown generator(s) {sorted(unknown)}")
    base = KINDS if args.include_gsm_symbolic else DEFAULT_KINDS
    kinds = tuple(k for k in base if k.name not in excluded)
    if not kinds:
        parser.error("--exclude leaves no generator")
    summary = generate(args.out, n_train=args.n_train, n_heldout=args.n_heldout, seed=args.seed, kinds=kinds)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
