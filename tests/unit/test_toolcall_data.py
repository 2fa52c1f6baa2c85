"""Tool-call RL data (toolcall-rl/toolcall_data.py): reasoning-gym problems, the JSONL loader, answers_match."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest
import toolcall_data as td
from toolcall_data import KINDS, answers_match, generate, load_problems

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "toolcall-rl" / "data"
TOOLCALL = REPO / "toolcall-rl"
KIND_NAMES = {k.name for k in KINDS}
CANONICAL = re.compile(r"-?\d+(?:/\d+|\.\d+)?")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def key(text: str) -> str:
    return " ".join(text.lower().split())


# ------------------------------------------------------------------------------------------ generation


def test_generate_is_deterministic_across_processes(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    generate(a, n_train=66, n_heldout=22, seed=3)
    generate(b, n_train=66, n_heldout=22, seed=3)
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, str(TOOLCALL / "toolcall_data.py"), "--out", str(c), "--seed", "3",
                    "--n-train", "66", "--n-heldout", "22"], check=True, env=env, capture_output=True, timeout=120)
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes() == (c / name).read_bytes()
    other = tmp_path / "other"
    generate(other, n_train=66, n_heldout=22, seed=4)
    assert (other / "train.jsonl").read_bytes() != (a / "train.jsonl").read_bytes()


@pytest.mark.skipif(version("reasoning-gym") != td.TESTED_VERSIONS["reasoning-gym"],
                    reason="the checked-in data were made with reasoning-gym 0.1.25")
def test_checked_in_data_are_what_the_command_makes(tmp_path):
    summary = generate(tmp_path, seed=0)  # the README's command: --seed 0, 2000 + 200
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
    assert summary["train"]["rows"] == 2000 and summary["heldout"]["rows"] == 200
    assert sum(p.stat().st_size for p in DATA.glob("*.jsonl")) < 2_000_000


@pytest.mark.parametrize("split, n", [("train", 2000), ("heldout", 200)])
def test_checked_in_format(split, n):
    rows = read_jsonl(DATA / f"{split}.jsonl")
    assert len(rows) == n
    assert [r["id"] for r in rows] == [f"{split}-{i:05d}" for i in range(n)]
    for r in rows:
        assert list(r) == ["prompt", "label", "source", "id", "split"]
        assert r["split"] == split and r["source"] in KIND_NAMES
        assert isinstance(r["prompt"], str) and 0 < len(r["prompt"]) < td.MAX_PROMPT_CHARS
        assert CANONICAL.fullmatch(r["label"]), r
    # the default mix: gsm_symbolic is left out for its licence (toolcall-rl/data/README.md)
    assert Counter(r["source"] for r in rows) == Counter(td._allocate(n, td.DEFAULT_KINDS))
    assert "gsm_symbolic" not in {r["source"] for r in rows}
    gcd = Counter(r["label"] for r in rows if r["source"] == "gcd")
    assert max(gcd.values()) <= max(2, 0.05 * sum(gcd.values()))  # "1" is not a winning guess
    # upstream-format consumers see exactly prompt/label; the loader reads our own files unchanged
    loaded = load_problems(DATA / f"{split}.jsonl")
    assert [(p["prompt"], p["label"], p["id"], p["source"], p["split"]) for p in loaded] == \
        [(r["prompt"], r["label"], r["id"], r["source"], r["split"]) for r in rows]


def test_checked_in_splits_are_disjoint():
    train = [key(r["prompt"]) for r in read_jsonl(DATA / "train.jsonl")]
    heldout = [key(r["prompt"]) for r in read_jsonl(DATA / "heldout.jsonl")]
    assert len(set(train)) == len(train) and len(set(heldout)) == len(heldout)
    assert not set(train) & set(heldout)


def test_heldout_is_deduplicated_against_train(tmp_path, monkeypatch):
    # lcm of 2 numbers in 10..12 has only 9 distinct problems (ordered pairs): train takes 5, held-out the others
    small = (td.Kind("lcm", 1.0, {"min_numbers": 2, "max_numbers": 2, "min_value": 10, "max_value": 12}),)
    generate(tmp_path, n_train=5, n_heldout=4, seed=0, kinds=small)
    train = {key(r["prompt"]) for r in read_jsonl(tmp_path / "train.jsonl")}
    heldout = [key(r["prompt"]) for r in read_jsonl(tmp_path / "heldout.jsonl")]
    assert len(train) == 5 and len(set(heldout)) == 4 and not train & set(heldout)
    monkeypatch.setattr(td, "_DATASET_SIZE", 300)  # fail fast rather than draw 100,000 duplicates
    with pytest.raises(RuntimeError, match="lcm: only 4 of 5 problems"):
        generate(tmp_path / "x", n_train=5, n_heldout=5, seed=0, kinds=small)


def test_tool_computed_answers_match_the_labels():
    """What the model's Python tool computes for an arithmetic row scores as correct (true division, floats)."""
    rows = read_jsonl(DATA / "train.jsonl")
    checked = 0
    for r in rows:
        if r["source"] == "basic_arithmetic":
            expr = r["prompt"].removeprefix("Calculate ").removesuffix(".")
        elif r["source"] == "decimal_arithmetic":
            expr = r["prompt"].splitlines()[-1].removesuffix("= ?")
        else:
            continue
        value = eval(expr, {"__builtins__": {}})  # our own arithmetic rows
        assert answers_match(repr(value), r["label"]), (expr, value, r["label"])
        assert not answers_match(repr(value + 1), r["label"])
        checked += 1
    # the generator's share of these two kinds, all present in train.jsonl and all checked
    assert checked == sum(td._allocate(len(rows), td.DEFAULT_KINDS)[k] for k in ("basic_arithmetic", "decimal_arithmetic"))


def test_allocate_is_exact():
    assert sum(td._allocate(2000, KINDS).values()) == 2000
    assert sum(td._allocate(7, KINDS).values()) == 7
    assert td._allocate(200, KINDS)["gsm_symbolic"] == 40


# ------------------------------------------------------------------------------------------ the loader


def write(tmp_path: Path, lines: list, name="mine.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((l if isinstance(l, str) else json.dumps(l)) + "\n" for l in lines), encoding="utf-8")
    return path


def test_load_problem_variants(tmp_path):
    path = write(tmp_path, [
        {"prompt": "What is 2+2?", "label": "4"},
        {"question": "Janet has 3 apples ...", "answer": "She has 3 + 4 = 7.\n#### 1,007"},
        {"problem": "Compute 1/2 + 1/3.", "answer": "\\frac{5}{6}", "level": 3},
        {"prompt": [{"role": "user", "content": "Solve x+1=3."}], "data_source": "math_dapo",
         "reward_model": {"ground_truth": "2", "style": "rule-math"}, "extra_info": {"index": "a"}},
        {"prompt": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Q?"}], "label": 12},
        "",
        {"question": "Half?", "answer": 0.5, "id": "h1", "split": "test", "source": "mine"},
    ])
    problems = load_problems(path)
    assert [(p["prompt"], p["label"]) for p in problems] == [
        ("What is 2+2?", "4"), ("Janet has 3 apples ...", "1007"), ("Compute 1/2 + 1/3.", "\\frac{5}{6}"),
        ("Solve x+1=3.", "2"), ("Q?", "12"), ("Half?", "0.5")]
    assert [p["id"] for p in problems] == ["mine-1", "mine-2", "mine-3", "mine-4", "mine-5", "h1"]
    assert [p["source"] for p in problems] == ["mine", "mine", "mine", "math_dapo", "mine", "mine"]
    assert problems[5]["split"] == "test" and problems[0]["split"] is None
    assert problems[2]["level"] == 3 and problems[3]["extra_info"] == {"index": "a"}  # other keys kept
    assert "question" not in problems[1] and "answer" not in problems[1]
    assert answers_match("1007", problems[1]["label"]) and answers_match("5/6", problems[2]["label"])


@pytest.mark.parametrize("line, message", [
    ('{"prompt": "x", "label": "1"', "not valid JSON"),
    ('[1, 2]', "expected a JSON object"),
    ('{"text": "x", "label": "1"}', "no prompt"),
    ('{"prompt": "What?"}', "no label"),
    ('{"prompt": "What?", "label": "  "}', "'label' is empty"),
    ('{"prompt": "", "label": "1"}', "non-empty string"),
    ('{"prompt": [], "label": "1"}', "empty message list"),
    ('{"prompt": [{"role": "system", "content": "s"}], "label": "1"}', "without a user message"),
    ('{"prompt": "What?", "label": null}', "must be a string or a number"),
    ('{"prompt": "What?", "label": true}', "must be a string or a number"),
    ('{"prompt": "What?", "reward_model": {"style": "rule"}}', "no label"),
])
def test_load_problems_names_the_bad_line(tmp_path, line, message):
    path = write(tmp_path, [{"prompt": "ok", "label": "1"}, "", line])
    with pytest.raises(ValueError) as e:
        load_problems(path)
    assert f"{path}:3:" in str(e.value) and message in str(e.value)


def test_load_problems_rejects_duplicate_ids_and_empty_files(tmp_path):
    path = write(tmp_path, [{"prompt": "a", "label": "1", "id": "x"}, {"prompt": "b", "label": "2", "id": "x"}])
    with pytest.raises(ValueError, match=r":2: id 'x' already used on line 1"):
        load_problems(path)
    with pytest.raises(ValueError, match="no problems"):
        load_problems(write(tmp_path, ["", "  "], name="empty.jsonl"))


def test_check_cli(tmp_path):
    good = write(tmp_path, [{"question": "q", "answer": "1"}], name="good.jsonl")
    bad = write(tmp_path, [{"question": "q"}], name="bad.jsonl")
    cmd = [sys.executable, str(TOOLCALL / "toolcall_data.py"), "--check"]
    ok = subprocess.run(cmd + [str(good)], capture_output=True, text=True, timeout=60, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout)["problems"] == 1
    err = subprocess.run(cmd + [str(bad)], capture_output=True, text=True, timeout=60, check=False)
    assert err.returncode == 1 and f"{bad}:1: no label" in err.stderr


def test_convert_writes_what_the_trainer_reads(tmp_path):
    from slime.rollout.data_source import load_prompt_samples

    gsm8k = write(tmp_path, [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"}],
                  name="gsm8k.jsonl")
    out = tmp_path / "converted" / "problems.jsonl"
    done = subprocess.run([sys.executable, str(TOOLCALL / "toolcall_data.py"), "--convert", str(gsm8k), str(out)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and json.loads(done.stdout)["written"] == str(out), done.stderr
    samples, _ = load_prompt_samples(str(out), input_key="prompt", label_key="label")  # as --prompt-data loads it
    assert [(s.prompt, s.label) for s in samples] == [("Tom has 3 apples and buys 4. How many?", "7")]


# ------------------------------------------------------------------------------------------ answers_match

MATCH_CASES = [
    # fractions in every notation
    ("\\frac{1}{2}", "1/2", True),
    ("0.5", "1/2", True),
    ("1/2", "0.5", True),
    ("\\boxed{1/2}", "1/2", True),
    ("\\boxed{\\frac{1}{2}}", "0.5", True),
    ("$\\dfrac{1}{2}$", "1/2", True),
    ("2/4", "1/2", True),
    ("-\\frac{1}{2}", "-0.5", True),
    # integers: thousands separators, trailing .0, delimiters, unicode minus
    ("1,234", "1234", True),
    ("1,234,567", "1234567", True),
    ("1234.0", "1234", True),
    ("1 234", "1,234", True),
    ("1{,}234", "1234", True),
    ("\\boxed{42}", "42", True),
    ("42.", "42", True),
    ("\u22125", "-5", True),
    ("1e6", "1000000", True),
    ("10^6", "1000000", True),
    # decimals and symbolic values (math-verify)
    ("6.320988372093023", "6.32098837209", True),
    ("0.333333", "1/3", True),
    ("\\sqrt{3}/2", "\\frac{\\sqrt{3}}{2}", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("The answer is 42.", "42", True),
    ("Friday", "friday", True),
    # no match
    ("4", "-4", False),
    ("\\boxed{43}", "42", False),
    ("41.9", "42", False),
    ("0.33", "1/3", False),
    ("6.32", "6.32098837209", False),
    ("0.866", "\\frac{\\sqrt{3}}{2}", False),
    ("12,34", "1234", False),
    ("\\boxed{7}\\boxed{8}", "7", False),
    ("7, 8", "7", False),
    ("banana", "42", False),
    ("", "42", False),
    (None, "42", False),
    ("\\frac{1}{0}", "1", False),
    ("Fridya", "Friday", False),  # math-verify alone reads both as the product F*r*i*d*a*y
    ("__import__('os').system('true')", "0", False),
]


@pytest.mark.parametrize("predicted, label, expected", MATCH_CASES)
def test_answers_match(predicted, label, expected):
    assert answers_match(predicted, label) is expected


def test_answers_match_off_the_main_thread():
    """math-verify's own timeout uses signal.alarm (ValueError off the main thread): ours works anywhere."""
    cases = [c for c in MATCH_CASES if c[0] is not None]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda c: answers_match(c[0], c[1]), cases * 3))
    assert results == [c[2] for c in cases * 3]

    async def rollout():
        return await asyncio.gather(*(asyncio.to_thread(answers_match, p, l) for p, l, _ in cases))

    assert asyncio.run(rollout()) == [c[2] for c in cases]


def test_answers_match_times_out_instead_of_hanging():
    out = {}

    def run():  # from a worker thread, as in a rollout
        t0 = time.monotonic()
        out["result"] = answers_match("9^{9^{9^{9}}}", "42", timeout=1.0)  # sympy would compute this for ever
        out["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert out["result"] is False and out["seconds"] < 10
    assert answers_match("\\sqrt{3}/2", "\\frac{\\sqrt{3}}{2}")  # the pool recovers with a fresh helper
