"""Serving and training as separate processes (the usage guide's serve / train split), on SQLite and PostgreSQL.

`python -m slime.conversation serve-model` (engine + proxy, no trainer) records into a store; `slime/train_async.py`
started on its own attaches to that store, the proxy and the engine (`--proxy-url`, `--conversation-store`,
`--rollout-external-engine-addrs`), trains and pushes weights back. Then, as operators do by accident or on purpose:
a second trainer is refused while the first holds the store; the trainer is killed (-9) and restarted; the server
is killed (-9) and restarted. Every judged turn is trained exactly once: each appears in exactly one trained
batch of the trainers' rollout dumps, and the store marks all of them trained.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from helpers.jobs import healthz, poll_until
from helpers.postgres import PostgresServer, skip_reason
from slime.conversation.store import ConversationStore
from slime.engine.launch import free_port

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


class Proc:
    """A child process in its own process group with its output in a log file; killed by PID."""

    def __init__(self, cmd: list[str], log: Path):
        self.name, self.log_path = log.stem, log
        self._fh = open(log, "ab")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        self.process = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=self._fh, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def kill9(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=60)
        self._fh.close()

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._fh.close()

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")


def _until(predicate, timeout: float, what: str, procs=()):
    return poll_until(predicate, timeout, what, procs, interval=0.5)


def _healthy(url: str) -> bool:
    return healthz(url) is not None


def _samples(store_url) -> dict:
    with ConversationStore(store_url) as store:
        return store.stats()["samples"]


def _chat(url: str, session: str, praises: int):
    """An opening question, then `praises` replies of praise: each judges the turn before it +1."""
    history = [{"role": "user", "content": "Name a colour."}]
    for _ in range(praises + 1):
        resp = httpx.post(url + "/v1/chat/completions", headers={"X-Session-Id": session}, timeout=120,
                          json={"messages": history, "max_tokens": 6})
        assert resp.status_code == 200, resp.text
        history += [resp.json()["choices"][0]["message"], {"role": "user", "content": "thanks, that is perfect"}]


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "conversations.db")
        return
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with PostgresServer() as pg:
        yield pg.create_database("served")


def test_serve_and_train_apart_restarts_train_every_turn_exactly_once(store_url, tmp_path):
    port, engine_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    serve_cmd = [sys.executable, "-m", "slime.conversation", "serve-model", "--model-path", "tiny", "--port", str(port),
                 "--engine-port", str(engine_port), "--store", store_url, "--run-dir", str(tmp_path / "serve"),
                 "--prm-type", "rules", "--conversation-method", "rl"]

    def trainer(name: str) -> Proc:
        run = tmp_path / "train"
        return Proc([sys.executable, "slime/train_async.py", "--hf-checkpoint", "tiny",
                     "--disable-rollout-global-dataset",
                     "--data-source-path", "slime.conversation.rollout.ConversationDataSource",
                     "--rollout-function-path", "slime.conversation.rollout.generate_rollout",
                     "--num-rollout", "1000", "--rollout-batch-size", "2", "--n-samples-per-prompt", "1",
                     "--rollout-max-response-len", "8", "--rollout-temperature", "0.6", "--reward-key", "score",
                     "--lr", "1e-5", "--prm-type", "rules", "--conversation-method", "rl", "--run-dir", str(run),
                     "--proxy-url", url, "--conversation-store", store_url,
                     "--rollout-external-engine-addrs", f"http://127.0.0.1:{engine_port}",
                     "--save-debug-rollout-data", str(run / f"dump_{name}_{{rollout_id}}.jsonl")],
                    tmp_path / f"trainer_{name}.log")

    procs: list[Proc] = []
    try:
        server = Proc(serve_cmd, tmp_path / "serve_1.log")
        procs.append(server)
        _until(lambda: _healthy(url), 180, "the server", [server])
        first = trainer("a")
        procs.append(first)
        _until(lambda: "trainer lease" in first.text(), 180, "the first trainer's lease", [first])

        # a second trainer while the first holds the store: refused, with who holds it
        second = trainer("refused")
        assert second.process.wait(timeout=180) != 0
        assert "another trainer (or collector) is attached to the store" in second.text(), second.text()[-3000:]

        _chat(url, "alice", praises=4)  # 4 judged turns -> 2 batches
        _until(lambda: _samples(store_url)["trained"] == 4, 300, "4 trained samples", [first, server])

        first.kill9()  # idle, waiting for the next batch
        _chat(url, "bob", praises=4)  # collected while no trainer runs
        restarted = trainer("b")
        procs.append(restarted)
        _until(lambda: _samples(store_url)["trained"] == 8, 300, "8 trained samples", [restarted, server])

        server.kill9()  # engine and proxy gone; the trainer waits
        server = Proc(serve_cmd, tmp_path / "serve_2.log")
        procs.append(server)
        _until(lambda: _healthy(url), 180, "the restarted server", [server])
        _chat(url, "carol", praises=4)
        _until(lambda: _samples(store_url)["trained"] == 12, 300, "12 trained samples", [restarted, server])
        # the restarted engine received the trained weights again
        _until(lambda: httpx.get(f"http://127.0.0.1:{engine_port}/health", timeout=5).json().get("weight_version")
               not in (None, "0"), 120, "a weight update of the restarted engine", [restarted, server])
    finally:
        for proc in reversed(procs):
            proc.stop()

    with ConversationStore(store_url) as store:
        stats = store.stats()
        judged = [t for t in store.recent_turns(100) if t.turn_type == "main" and t.status == "sampled"]
    assert stats["samples"] == {"pending": 0, "in_batch": 0, "trained": 12, "exported": 0}, stats
    assert len(judged) == 12
    trained_ids = []
    for dump in sorted((tmp_path / "train").glob("dump_*.jsonl")):
        trained_ids += [json.loads(line)["metadata"]["turn_id"] for line in dump.read_text().splitlines()]
    assert sorted(trained_ids) == sorted(t.id for t in judged), "every judged turn trained exactly once"


def test_collect_into_a_rollout_directory_and_train_from_it_once(tmp_path):
    """The guide's three commands: serve-model records, `collect` moves the judged samples into a rollout
    directory (from the store, then over the server's API with --session-aware), `train --rollout-dir` trains from
    it and pushes weights to the serving engine; a second collect and train pick up only what is new."""
    store = str(tmp_path / "conversations.db")
    rollouts, ckpt = tmp_path / "rollouts", tmp_path / "ckpt"
    port, engine_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    server = Proc([sys.executable, "-m", "slime.conversation", "serve_model", "--model-path", "tiny", "--port",
                   str(port), "--engine-port", str(engine_port), "--store", store, "--run-dir", str(tmp_path / "serve"),
                   "--prm-type", "rules", "--conversation-method", "rl"], tmp_path / "serve.log")
    cli = [sys.executable, "-m", "slime.conversation"]
    def train(steps: int) -> list[str]:  # --num-rollout counts every step of the policy, resumed runs included
        return [*cli, "train", "--rollout-dir", str(rollouts), "--checkpoint-dir", str(ckpt), "--method", "rl",
                "--model-path", "tiny", "--engine-url", f"http://127.0.0.1:{engine_port}", "--batch-size", "2",
                "--num-rollout", str(steps), "--save-interval", "1", "--rollout-max-response-len", "8"]

    try:
        _until(lambda: _healthy(url), 180, "the server", [server])
        _chat(url, "dora", praises=4)
        _until(lambda: _samples(store)["pending"] == 4, 60, "4 judged samples", [server])
        out = subprocess.run([*cli, "collect", "--store", store, "--output-dir", str(rollouts)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "4 samples ->" in out.stdout, out.stdout + out.stderr
        assert _samples(store) == {"pending": 0, "in_batch": 0, "trained": 0, "exported": 4}
        first = subprocess.run(train(2), cwd=REPO, capture_output=True, text=True, timeout=600)
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        _chat(url, "emil", praises=4)
        _until(lambda: _samples(store)["pending"] == 4, 60, "4 more judged samples", [server])
        # the guide's form: over the serving host's API, no access to the store needed
        out = subprocess.run([*cli, "collect_rollouts", "--api-endpoint", url, "--output-dir", str(rollouts),
                              "--session-aware"], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "samples ->" not in out.stdout, out.stdout + out.stderr  # session still open
        with ConversationStore(store) as db:
            db.finalize_session("emil", "session_done")
        out = subprocess.run([*cli, "collect_rollouts", "--api-endpoint", url, "--output-dir", str(rollouts),
                              "--session-aware"], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "4 samples ->" in out.stdout, out.stdout + out.stderr
        second = subprocess.run(train(4), cwd=REPO, capture_output=True, text=True, timeout=600)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
        assert "--load" in second.stderr  # it continued from the first run's checkpoint
        version = httpx.get(f"http://127.0.0.1:{engine_port}/health", timeout=5).json().get("weight_version")
        assert version not in (None, "0")  # the serving engine got the trained weights
    finally:
        server.stop()
    ledger = [json.loads(line) for line in (rollouts / "trained.jsonl").read_text().splitlines()]
    trained = [t for entry in ledger for t in entry["turn_ids"]]
    assert len(trained) == len(set(trained)) == 8, ledger
    assert len(list(rollouts.glob("rollout_*.jsonl"))) == 2
