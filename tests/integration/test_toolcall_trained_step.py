"""The whole tool-call loop under torchrun with a policy that calls its tool: generate -> `<tool_call>` -> the
sandbox runs the code -> the `<interpreter>` observation -> more turns or an answer -> the reward -> an optimizer
step on 2 ranks. The policy is the tiny model warm-started by SFT on tool traces (tests/helpers/toolcall_policy.py).

Pinned: some trajectories call the tool and some calls run without error (real sandbox runs, their output in the
observation); the observation tokens carry loss mask 0 and log-prob 0; with dynamic history every step sample is
exactly what the engine generated (the trainer's recomputed log-probs of its ids equal the engine's, |Δlogp| ~ 0,
which a re-tokenised sample would not give); the rewards differ within groups, so the step has a gradient; and with
the rule PRM (`--step-judge rules`) every step is scored and `step_wise` advantages train."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.toolcall_policy import build_toolcall_policy
from slime.agentic import sandbox as sb

REPO = Path(__file__).resolve().parents[2]
_CAP = sb.detect_capability("bwrap")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _CAP.available, reason=f"no bwrap sandbox on this host: {_CAP.problem}")]


@pytest.fixture(scope="module")
def policy():
    return build_toolcall_policy()


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "count_bits.jsonl"
    rows = [line for line in (REPO / "toolcall-rl/data/train.jsonl").read_text().splitlines()
            if json.loads(line)["source"] == "count_bits"]
    path.write_text("\n".join(rows[:40]) + "\n")
    return path


def _observations(sample: dict) -> list[tuple[int, int]]:
    """The masked spans of a response: (start, end) of each run of loss-mask 0."""
    spans, start = [], None
    for i, m in enumerate(sample["loss_mask"] + [1]):
        if m == 0 and start is None:
            start = i
        elif m == 1 and start is not None:
            spans.append((start, i))
            start = None
    return spans


@pytest.mark.parametrize("mode", ["one-sample", "dynamic-history", "step-wise-rules"])
def test_a_trained_step_through_real_tool_calls(tmp_path, policy, problems, mode):
    from transformers import AutoTokenizer

    run = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "slime/train.py", "--hf-checkpoint", str(policy), "--prompt-data", str(problems),
               "--input-key", "prompt", "--label-key", "label",
               "--extra-python-path", "toolcall-rl", "--custom-generate-function-path", "generate_with_retool.generate",
               "--custom-rm-path", "generate_with_retool.reward_func", "--reward-key", "score",
               "--tools-config", "toolcall-rl/tools.json", "--max-turns", "3", "--max-tool-calls", "3",
               "--tool-timeout", "30", "--num-rollout", "2", "--rollout-batch-size", "4", "--n-samples-per-prompt", "4",
               "--rollout-max-response-len", "96", "--rollout-max-context-len", "2048", "--rollout-temperature", "1.0",
               "--rollout-seed", "3", "--advantage-estimator", "grpo", "--lr", "1e-4",
               "--run-dir", str(run), "--save-debug-rollout-data", str(run / "rollout_{rollout_id}.jsonl")]
    dynamic = mode == "dynamic-history"
    if dynamic:
        command.append("--dynamic-history")
    if mode == "step-wise-rules":  # the setting's CPU PRM scores every step; advantages per (group, step) bucket
        command += ["--step-judge", "rules", "--advantage-estimator", "step_wise"]
    log = tmp_path / "train.log"
    with open(log, "w") as out:  # its own process group: a timeout stops torchrun's ranks too
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            code = proc.wait(timeout=480)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail("the run did not finish in 480 s:\n" + log.read_text()[-4000:])
    assert code == 0, log.read_text()[-6000:]
    tok = AutoTokenizer.from_pretrained(policy)
    samples = [{**json.loads(line), "rollout": k} for k in range(2)
               for line in (run / f"rollout_{k}.jsonl").read_text().splitlines()]
    assert sum(s["metadata"]["tool_calls"] for s in samples) > 0
    assert any(s["metadata"]["successful_tool_calls"] > 0 for s in samples), "no call ran without error"
    if dynamic:
        # one sample per generation step, all trained, the context of step k+1 = step k's context + its ids + the
        # observation the environment wrote
        for s in samples:
            assert set(s["loss_mask"]) == {1} and len(s["rollout_log_probs"]) == s["response_length"]
        steps = {}
        for s in samples:
            steps.setdefault((s["rollout"], s["group_index"], s["index"]), []).append(s)
        multi = [v for v in steps.values() if len(v) > 1]
        assert multi, "no trajectory took more than one step"
        for trajectory in multi:
            trajectory.sort(key=lambda s: s["metadata"]["step"])
            for before, after in zip(trajectory, trajectory[1:]):
                assert after["tokens"][:len(before["tokens"])] == before["tokens"]
                between = tok.decode(after["tokens"][len(before["tokens"]):len(after["tokens"]) - after["response_length"]])
                assert between.startswith("\n\n<interpreter>\n") and between.endswith("\n</interpreter>\n\n")
    else:
        called = [s for s in samples if s["metadata"]["turns"] > 1]
        assert called
        for s in called:
            spans = _observations(s)
            # exactly the gaps between the generation steps are masked (and, when the turn budget ended the
            # trajectory on a call, the last call's observation after the last step)
            steps = s["metadata"]["step_wise"]["step_token_spans"]
            gaps = [(end, start) for (_, end), (start, _) in zip(steps, steps[1:])]
            assert spans in (gaps, gaps + [(steps[-1][1], s["response_length"])]), (spans, steps)
            response = s["tokens"][len(s["tokens"]) - s["response_length"]:]
            for start, end in spans:
                text = tok.decode(response[start:end])
                assert text.startswith("\n\n<interpreter>\n") and text.endswith("\n</interpreter>\n\n")
                assert all(lp == 0.0 for lp in s["rollout_log_probs"][start:end])
        # a call that ran: the sandbox's output is what the program printed, a count of 1 bits
        printed = [tok.decode(s["tokens"][len(s["tokens"]) - s["response_length"]:][a:b]).strip()
                   for s in called if s["metadata"]["successful_tool_calls"] for a, b in _observations(s)]
        assert any(p.removeprefix("<interpreter>").removesuffix("</interpreter>").strip().isdigit() for p in printed), printed
    if mode == "step-wise-rules":
        for s in samples:
            prm = s["metadata"]["step_wise"]["prm_scores"]
            assert len(prm) == s["metadata"]["turns"] and set(prm) <= {-1.0, 1.0}
        judged = [p for s in samples for p in s["metadata"]["step_wise"]["prm_scores"]]
        assert 1.0 in judged and -1.0 in judged  # calls that ran, and ones that failed or did not parse
    scores = [s["reward"]["score"] for s in samples]
    assert len(set(scores)) > 1  # successful calls are shaped above failed ones: groups have variance
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trained = [m for m in metrics if "train/pg_loss" in m]
    assert len(trained) >= 2 and any(m["train/grad_norm"] > 0 for m in trained)
    # the trainer's log-probs of the stored ids equal the engine's: the samples hold exactly what was generated
    assert all(m["train/train_rollout_logprob_abs_diff"] < 0.02 for m in trained), \
        [m["train/train_rollout_logprob_abs_diff"] for m in trained]
