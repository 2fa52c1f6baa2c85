"""openclaw-test's runner end to end on the tiny model (mechanics, not learning): the Hydra app starts the
Combine server, simulated users talk to it for exactly N interactions, every checkpoint waits for the trainer
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
         "eval.concurrency=3", "concurrency=3", "sync_timeout=300"]


def _run(args: list[str], tmp_path: Path, timeout: float = 500) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(RUN + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
    return done


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_run_starts_the_server_talks_trains_evaluates_and_writes_results(tmp_path):
    out = tmp_path / "run"
    done = _run(SMALL + ["persona=concise", "checkpoints=[4,8]", f"hydra.run.dir={out}"], tmp_path)
    assert "interactions" in done.stdout and "ETA" in done.stdout  # progress lines

    result = json.loads((out / "result.json").read_text())
    assert result["persona"] == "concise" and result["method"] == "combine" and result["model"] == "tiny"
    assert result["versions"] == {"persona": "concise-v1", "quality": "quality-v1"}
    assert [p["interactions"] for p in result["curve"]] == [0, 4, 8]
    assert result["base_with_hint"]["hint"] is True and result["base_with_hint"]["n"] == 3
    for point in result["curve"]:
        assert 0.0 <= point["preference"] <= 1.0 and 0.0 <= point["quality"] <= 1.0 and point["n"] == 3
    # at every checkpoint each full batch of 4 was trained and its weights were being served
    assert result["curve"][1]["train_steps"] == 1 and result["curve"][2]["train_steps"] == 2
    assert all(p["weight_version"] >= p["train_steps"] for p in result["curve"])
    # what the wall times were measured on: usable CPUs and the load average at the start and the end
    assert result["host"]["cpus"] >= 1
    assert result["host"]["load_at_start"] >= 0 and result["host"]["load_at_end"] >= 0

    interactions = _lines(out / "interactions.jsonl")
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
    assert server["turns"]["side"] == 3 * 4  # (base, base with hint, @4, @8) x 3 prompts
    assert len(_lines(out / "eval_8.jsonl")) == 3 and len(_lines(out / "eval_0_hint.jsonl")) == 3
    assert (out / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "server" / "metrics.jsonl").exists()  # the server it started trained in the run's folder
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
                      "eval.hint_baseline=false", f"server.url={job.url}", f"hydra.sweep.dir={tmp_path / 'multi'}"],
             tmp_path)
        stats = httpx.get(job.url + "/v1/stats", timeout=10).json()
    results = sorted((json.loads(p.read_text()) for p in (tmp_path / "multi").rglob("result.json")),
                     key=lambda r: (r["persona"], r["seed"]))
    assert [(r["persona"], r["seed"]) for r in results] == [("greeter", 0), ("greeter", 1), ("student", 0),
                                                            ("student", 1)]
    assert all("base_with_hint" not in r for r in results)
    assert stats["turns"]["main"] == 4 * 4 and stats["judged"] == 16  # each run counted only its own turns
    # the same seed asks the same questions: seeds 0 and 1 differ, a persona's seed-0 plan is reproducible
    plans = {(r["persona"], r["seed"]): [i["problem_id"] for i in _lines(
        next((tmp_path / "multi").rglob(f"rl-{r['persona']}-tiny-seed{r['seed']}")) / "interactions.jsonl")]
        for r in results}
    assert plans[("student", 0)] != plans[("student", 1)]
    from slime.personalization.report import load_results, markdown_table

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
