"""The tool-call loop against a real engine (tiny model) and the real sandbox.

The random-weight model never writes a valid call, so its trajectories take the invalid-action path until the turn
budget ends them: what this pins is the bookkeeping (observation tokens masked, spans, step samples made of exactly
the ids the engine generated, the reward). The tool path itself runs through the real sandbox below.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from slime.agentic import sandbox as sb
from generate_with_retool import (INVALID_ACTION, STOP_STRINGS, format_observation, generate, load_tools, reward_func,
                                    run_tool)
from slime.utils.types import Sample

_CAP = sb.detect_capability("bwrap")
needs_sandbox = pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")


def _args(engine_url, model, **kw):
    return SimpleNamespace(hf_checkpoint=str(model), engine_urls=[engine_url], rollout_max_context_len=1024,
                           max_turns=3, dynamic_history=False, **kw)


def _params():
    # stop strings the random model writes within a few tokens: each turn ends on "stop" (not the length cap), so
    # trajectories take several turns with an observation between them
    return {"temperature": 1.0, "max_new_tokens": 12, "no_stop_trim": True, "seed": 7, "stop": [" ", "e", "a", "t"]}


def test_a_trajectory_masks_every_observation_and_keeps_the_engines_ids(engine_server, tiny_model_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    sample = Sample(group_index=0, index=0, prompt="What is 2**10?", label="1024")
    out = asyncio.run(generate(_args(engine_server.url, tiny_model_path), sample, _params()))
    assert out is sample and out.metadata["turns"] == 3  # the turn budget: every turn was an invalid action
    spans = out.metadata["step_wise"]["step_token_spans"]
    mask = out.loss_mask
    assert len(mask) == out.response_length == len(out.rollout_log_probs)
    trained = {i for start, end in spans for i in range(start, end)}
    assert {i for i, m in enumerate(mask) if m} == trained  # exactly the generated tokens train
    # between two steps: the observation the environment wrote, masked, with log-prob 0
    for (_, end), (start, _) in zip(spans, spans[1:]):
        observation = tok.decode(out.tokens[len(out.tokens) - out.response_length + end:
                                            len(out.tokens) - out.response_length + start])
        assert observation == format_observation(INVALID_ACTION)
        assert all(out.rollout_log_probs[i] == 0.0 for i in range(end, start))
    assert out.metadata["answer"] is None and out.status == Sample.Status.TRUNCATED
    reward = asyncio.run(reward_func(SimpleNamespace(), out))
    assert reward["acc"] == 0.0 and reward["score"] == pytest.approx(-1.1)
    assert out.metadata["invalid_actions"] == len(spans) and reward["parse_error"] == 1.0 and reward["answered"] == 0.0


def test_dynamic_history_gives_one_sample_per_step_with_its_exact_context(engine_server, tiny_model_path):
    args = _args(engine_server.url, tiny_model_path)
    whole = asyncio.run(generate(args, Sample(group_index=3, index=5, prompt="What is 7*6?", label="42"), _params()))
    args.dynamic_history = True
    steps = asyncio.run(generate(args, Sample(group_index=3, index=5, prompt="What is 7*6?", label="42"), _params()))
    assert isinstance(steps, list) and len(steps) == whole.metadata["turns"] == 3
    prompt_len = len(whole.tokens) - whole.response_length
    for k, (step, (start, end)) in enumerate(zip(steps, whole.metadata["step_wise"]["step_token_spans"])):
        assert (step.group_index, step.index, step.metadata["step"]) == (3, 5, k)
        # same seed, same engine: each step's context is the whole trajectory's prefix, its ids the same tokens
        assert step.tokens == whole.tokens[:prompt_len + end]
        assert step.response_length == end - start and step.loss_mask == [1] * (end - start)
        # the same log-probs up to float32 order of summation: the second run's prefill reuses the first's prefix
        # cache, which moved one value by 5e-7 (over pytest.approx's default relative 1e-6) on a 2-core machine
        assert step.rollout_log_probs == pytest.approx(whole.rollout_log_probs[start:end], rel=1e-6, abs=1e-5)
    assert asyncio.run(reward_func(SimpleNamespace(), steps)) == [
        {"score": pytest.approx(-1.1), "acc": 0.0, "tool_call": 0.0, "answered": 0.0, "parse_error": 1.0,
         "budget_exceeded": 0.0}] * len(steps)


@needs_sandbox
def test_the_code_interpreter_runs_in_the_sandbox(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")  # the parent's secret must not reach the code
    [tool] = load_tools("toolcall-rl/tools.json")
    said, ok, _ = asyncio.run(run_tool(tool, {"code": "import sympy\nprint(sympy.factorint(360))"}, timeout=30))
    assert ok and said == "{2: 3, 3: 2, 5: 1}"
    said, ok, _ = asyncio.run(run_tool(tool, {"code": "1/0"}, timeout=30))
    assert not ok and "ZeroDivisionError" in said
    said, ok, _ = asyncio.run(run_tool(tool, {"code": "import os\nprint(os.environ.get('OPENAI_API_KEY'))"}, timeout=30))
    assert ok and said == "None"
    said, ok, _ = asyncio.run(run_tool(tool, {"code": "while True: pass"}, timeout=2))
    assert not ok and "limit" in said
    # memory spread over 12 processes of 200 MB (each far below the per-process limit), all held at once (a pipe
    # says each has its memory), goes over the 2 GiB budget: the call says so, and the episode is then over (-1)
    if sb.detect_capability("bwrap").budgets:
        # (it waits until all 12 hold their memory, or one is gone: the OOM killer; then it ends them all)
        spread = ("import os, select, signal, time\nr, w = os.pipe()\nkids = []\nfor _ in range(12):\n"
                  "    pid = os.fork()\n    if pid == 0:\n        b = bytearray(200 << 20); b[::4096] = bytes(len(b[::4096]))\n"
                  "        os.write(w, b'x'); signal.pause()\n    kids.append(pid)\nos.close(w)\ngot = 0\n"
                  "deadline = time.monotonic() + 25\nwhile got < 12 and time.monotonic() < deadline:\n"
                  "    if select.select([r], [], [], 0.2)[0]:\n        got += len(os.read(r, 64))\n"
                  "    elif os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT):\n        break\n"
                  "for pid in kids:\n    try:\n        os.kill(pid, 9)\n    except ProcessLookupError:\n        pass\n"
                  "    os.waitpid(pid, 0)\nprint('held by', got)")
        said, ok, over = asyncio.run(run_tool(tool, {"code": spread}, timeout=30))
        assert not ok and "memory budget" in over and "The episode is over" in said, (said, over)
    assert set(STOP_STRINGS) == {"</tool_call>", "</code>"}


def test_with_a_prm_every_step_is_judged_by_the_prm_engine(engine_server, tiny_model_path):
    """The tiny model as the PRM: its votes are noise (mostly invalid), but every step gets its m votes through the
    engine's chat API, and the scores line up with the steps."""
    from slime.agentic import prm

    args = _args(engine_server.url, tiny_model_path, prm_enable=True, prm_engine_url=engine_server.url, prm_m=2,
                 prm_temperature=1.0, prm_max_new_tokens=8, prm_step_coef=1.0)
    prm._JUDGES.clear()
    out = asyncio.run(generate(args, Sample(group_index=0, index=1, prompt="What is 3+4?", label="7"), _params()))
    scores = out.metadata["step_wise"]["prm_scores"]
    assert len(scores) == out.metadata["turns"] and all(s is None or -1 <= s <= 1 for s in scores)
    [judge] = prm._JUDGES.values()
    assert judge.stats["steps"] == out.metadata["turns"]
    assert judge.stats["votes"] + judge.stats["failed_calls"] == 2 * out.metadata["turns"]
    asyncio.run(reward_func(args, out))
    assert len(out.metadata["step_wise"]["step_scores_with_outcome"]) == len(scores)


def test_a_problem_longer_than_the_context_is_refused_gracefully(engine_server, tiny_model_path):
    args = _args(engine_server.url, tiny_model_path)
    args.rollout_max_context_len = 16  # the system prompt alone is longer
    for dynamic in (False, True):
        args.dynamic_history = dynamic
        out = asyncio.run(generate(args, Sample(group_index=0, index=2, prompt="What is 1+1?", label="2"), _params()))
        assert isinstance(out, Sample) and out.remove_sample and out.status == Sample.Status.TRUNCATED
        assert out.response_length == 0 and out.metadata["turns"] == 0
