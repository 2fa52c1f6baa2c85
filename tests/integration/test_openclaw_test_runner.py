"""openclaw-test's runner end to end on the tiny model (mechanics, not learning): the Hydra app starts the
Combine server (the default method: the top-K head term), simulated users talk to it for exactly N interactions, every checkpoint waits for the trainer
and evaluates held-out requests as side turns, and the result files are written; multirun over seeds attaches
to one running server. The tiny random model answers nonsense, so the persona's complaints drive training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from slime.conversation.launch import ConversationJob

ROOT = Path(__file__).resolve().parents[2]
RUN = [sys.executable, str(ROOT / "openclaw-test" / "run.py")]
SMALL = ["model=tiny", "judge=rules", "trainer.batch_size=4", "generation.max_tokens=16", "eval.num_prompts=3",
         "eval.samples_per_prompt=1", "eval.ood_prompts=2", "eval.concurrency=3", "concurrency=3", "sync_timeout=300"]


def _run(args: list[str], tmp_path: Path, timeout: float = 500) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(RUN + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
    return done


def _lines(path: Path) -> list[dict]:
    if path.suffix == ".gz":
        import gzip

        return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_run_starts_the_server_talks_trains_evaluates_and_writes_results(tmp_path):
    out = tmp_path / "run"
    done = _run(SMALL + ["persona=upbeat", "checkpoints=[4,8]", "eval.probe_every=2", f"hydra.run.dir={out}"],
                tmp_path)
    assert "interactions" in done.stdout and "ETA" in done.stdout  # progress lines

    result = json.loads((out / "result.json").read_text())
    assert result["persona"] == "upbeat" and result["model"] == "tiny"
    # the default method: Combine with the top-K teacher term on the first 4 response positions (forward KL), batch 4
    assert (result["method"], result["variant"]) == ("combine_topk", "fwd-head4-bs4")
    assert [str(a) for a in result["config"]["method"]["extra_args"]] == [
        "--distill-divergence", "forward", "--distill-head-positions", "4"]
    assert result["versions"] == {"persona": "upbeat-v1", "quality": "quality-v1"}
    assert result["eval_protocol"] == "v2" and result["eval"]["told"] == "judge"
    assert [p["interactions"] for p in result["curve"]] == [0, 4, 8]
    # told with the hints the rules judge writes from the persona's corrections, cycled over the prompts
    told = result["base_with_hint"]
    assert told["hint"] is True and told["n"] == 3 and told["source"] == "judge"
    from personalization.personas import get_persona
    from personalization.simulate import judge_hints

    assert told["hints"] == judge_hints(get_persona("upbeat")) and len(told["hints"]) == 3
    assert [item["hint"] for item in _lines(out / "eval_0_hint.jsonl.gz")] == told["hints"]
    assert result["base_with_hint_ood"]["n"] == 2
    for point in result["curve"]:
        assert 0.0 <= point["preference"] <= 1.0 and 0.0 <= point["quality"] <= 1.0 and point["n"] == 3
        assert 0.0 <= point["pleased"] <= 1.0 and point["ood"]["n"] == 2
        # the probes were scored on the live policy: P(opens with "Sure!" or "Of course!") over 3 prompts
        probe = point["probe"]
        assert probe["probes"] == ["Sure!", "Of course!"] and probe["n"] == 3
        assert probe["logprob"] < 0 and 0 < probe["prob"] < 1
    assert result["probe_told"]["n"] == 3
    # the dense probe curve: every checkpoint, and every 2 interactions between them (on the served weights)
    dense = result["probe_curve"]
    assert [p["interactions"] for p in dense] == [0, 2, 4, 6, 8]
    assert all(p["n"] == 3 and p["weight_version"] >= 0 for p in dense)
    assert dense[4]["logprob"] == result["curve"][2]["probe"]["logprob"]
    # the weights changed between checkpoints, and the probe saw it
    assert result["curve"][0]["probe"]["logprob"] != result["curve"][2]["probe"]["logprob"]
    # at every checkpoint each full batch of 4 was trained and its weights were being served
    # (a turn whose reaction gives neither a reward nor a hint makes no sample, so 8 turns can make 7 samples)
    for point in result["curve"]:
        samples = point["samples"]
        assert samples["in_batch"] == 0 and samples["pending"] < 4
        assert point["train_steps"] * 4 == samples["trained"]
    assert result["curve"][1]["train_steps"] == 1 and result["curve"][2]["train_steps"] >= 1
    assert all(p["weight_version"] >= p["train_steps"] for p in result["curve"])
    # what the wall times were measured on: usable CPUs and the load average at the start and the end
    assert result["host"]["cpus"] >= 1
    assert result["host"]["load_at_start"] >= 0 and result["host"]["load_at_end"] >= 0

    interactions = _lines(out / "interactions.jsonl.gz")
    assert [i["index"] for i in interactions] == list(range(8))  # exactly N, never overshot
    met = [i for i in interactions if i["preference"] >= 0.75]
    assert result["training_replies"] == {"n": 8, "met": len(met),
                                          "met_and_answered": sum(1 for i in met if i["quality"] > 0),
                                          "met_first_attempt": sum(1 for i in met if i["turn"] == 1)}
    assert {i["reaction_kind"] for i in interactions} <= {"positive", "correction", "retry", "move_on",
                                                          "no_answer", "noise"}
    assert all(i["turn"] in (1, 2) for i in interactions)
    # the server saw them all as main-line turns, and the evaluation only as side turns
    server = result["server_stats"]
    assert server["turns"]["main"] == 8 and server["judged"] == 8
    assert server["turns"]["side"] == 3 * 4 + 2 * 4  # (told, @0, @4, @8) x (3 held out + 2 out of template)
    # the per-reply files and the trainer's metrics are packed for committing; no plain copies are left
    assert len(_lines(out / "eval_8.jsonl.gz")) == 3 and len(_lines(out / "eval_8_ood.jsonl.gz")) == 2
    assert not list(out.glob("*.jsonl"))
    metrics = _lines(out / "train_metrics.jsonl.gz")
    assert metrics and metrics == _lines(out / "server" / "metrics.jsonl")
    assert (out / "curve.png").read_bytes()[:4] == b"\x89PNG"
    # its trainer checkpointed at the clean stop, and the finished run deleted the checkpoints (keep_checkpoints)
    assert result["checkpoints_removed_bytes"] > 0 and not (out / "server" / "ckpt").exists()


@pytest.mark.slow
def test_multirun_over_seeds_attaches_to_one_running_server(tmp_path):
    job = ConversationJob("openclaw-rl/run_cpu_smollm2_openclaw_rl.sh", "--hf-checkpoint", "tiny",
                          "--rollout-max-response-len", "16", log_path=tmp_path / "job.log",
                          env={"RUN_DIR": str(tmp_path / "server"), "ROLLOUT_BATCH_SIZE": "4", "PRM_TYPE": "rules"},
                          ready_timeout=300)
    with job:
        _run(["-m"] + SMALL + ["method=rl", "persona=student,greeter", "seed=0,1", "checkpoints=[4]",
                      "eval.told=none", f"server.url={job.url}", f"hydra.sweep.dir={tmp_path / 'multi'}"],
             tmp_path)
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
    results = sorted((json.loads(p.read_text()) for p in (tmp_path / "multi").rglob("result.json")),
                     key=lambda r: (r["persona"], r["seed"]))
    assert [(r["persona"], r["seed"]) for r in results] == [("greeter", 0), ("greeter", 1), ("student", 0),
                                                            ("student", 1)]
    assert all("base_with_hint" not in r for r in results)
    # attached without an engine URL: no probes, and the runs' evaluation samples differ by seed
    assert all("probe" not in p for r in results for p in r["curve"])
    assert {r["eval"]["seed"] for r in results} == {1234, 101234}
    assert stats["turns"]["main"] == 4 * 4 and stats["judged"] == 16  # each run counted only its own turns
    # the same seed asks the same questions: seeds 0 and 1 differ, a persona's seed-0 plan is reproducible
    plans = {(r["persona"], r["seed"]): [i["problem_id"] for i in _lines(
        next((tmp_path / "multi").rglob(f"rl-{r['persona']}-tiny-seed{r['seed']}")) / "interactions.jsonl.gz")]
        for r in results}
    assert plans[("student", 0)] != plans[("student", 1)]
    from personalization.report import load_results, markdown_table

    table = markdown_table(load_results(tmp_path / "multi"))
    assert "| greeter | rl | 2 |" in table and "| student | rl | 2 |" in table


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc's parent links)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_sigterm_stops_the_run_and_the_server_it_started_even_in_the_background(tmp_path):
    import signal
    import time

    out = tmp_path / "run"
    # started like `nohup ... &` from a script: SIGINT is inherited as ignored
    runner = subprocess.Popen(RUN + SMALL + ["checkpoints=[400]", f"hydra.run.dir={out}"], cwd=ROOT,
                              env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 300
        while not (out / "interactions.jsonl").exists() or not (out / "interactions.jsonl").read_text():
            assert runner.poll() is None and time.monotonic() < deadline, runner.stdout.read()[-3000:]
            time.sleep(1)
        children = _descendants(runner.pid)
        assert len(children) >= 3  # the launch script's trainer, its engines and the proxy
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=240)
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(1)
        assert not [pid for pid in children if _alive(pid)]
        assert "stop requested" in (out / "server.log").read_text(errors="replace")  # a clean stop, not a kill
    finally:
        if runner.poll() is None:
            runner.kill()
