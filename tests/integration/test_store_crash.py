"""A writer killed with SIGKILL mid-run loses nothing it reported as committed, and the file stays sound.

The child process writes turns, judgements and samples in a tight loop (with 60 KB requests, so a kill
very likely lands inside a transaction) and prints each id only after its commit. The parent kills it at
an arbitrary point, reopens the store, and checks every reported row. Three rounds on the same file: each
new writer continues on a store that was just crashed.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from slime.conversation.store import ConversationStore

CHILD = textwrap.dedent("""
    import sys
    from slime.conversation.store import ConversationStore

    path, round_ = sys.argv[1], int(sys.argv[2])
    store = ConversationStore(path)
    system = "You are a careful agent. " * 2500  # ~60 KB, like a real agent system prompt
    batch = round_ * 1000
    i = 0
    while True:
        session = f"r{round_}-s{i % 7}"
        turn = store.add_turn(
            session_id=session, turn_type="main", turn_reason="header", status="awaiting_next_state",
            request={"messages": [{"role": "system", "content": system}, {"role": "user", "content": f"q{i} ✓"}]},
            response_message={"role": "assistant", "content": f"a{i}"},
            prompt_ids=list(range(i, i + 3000)), response_ids=[i, i + 1], response_logprobs=[-i / 7, -0.5],
            weight_version="v1", finish_reason="stop", trace_id=None, fingerprints=[f"fp{i}"])
        print(f"turn {turn.id} {i}", flush=True)
        store.set_next_state(turn.id, [{"role": "user", "content": f"next {i}"}], "request")
        store.set_judgement(turn.id, {"score": 1.0, "votes": [], "judge": "rules", "failed": False})
        print(f"judged {turn.id}", flush=True)
        sample_id = store.add_sample(turn.id, {"i": i, "tokens": list(range(3000))}, reward=1.0)
        print(f"sample {sample_id} {turn.id}", flush=True)
        if i % 5 == 4:
            claimed = store.claim_samples(batch, 3)
            if claimed is not None:
                print("claimed " + " ".join(str(s["sample_id"]) for s in claimed), flush=True)
                batch += 1
        i += 1
""")


def run_and_kill(path, round_: int, kill_after_lines: int) -> list[str]:
    """Runs the writer until it has reported `kill_after_lines` commits, then SIGKILLs it."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(round_)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8")
    lines: list[str] = []
    try:
        while len(lines) < kill_after_lines:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer exited early: {proc.wait()} {proc.stderr.read()}")
            lines.append(line.strip())
        os.kill(proc.pid, signal.SIGKILL)
        # lines already flushed before the kill were committed too
        lines += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    return lines


def check_reported_rows(store: ConversationStore, lines: list[str]) -> tuple[set[int], set[int]]:
    samples, claimed = set(), set()
    for line in lines:
        kind, *rest = line.split()
        if kind == "turn":
            turn_id, i = int(rest[0]), int(rest[1])
            turn = store.get_turn(turn_id)
            assert turn is not None, f"reported turn {turn_id} is missing"
            assert turn.request["messages"][1]["content"] == f"q{i} ✓"
            assert turn.prompt_ids == list(range(i, i + 3000))
            assert turn.response_logprobs == [-i / 7, -0.5]
        elif kind == "judged":
            turn = store.get_turn(int(rest[0]))
            assert turn.judgement is not None and turn.next_state is not None
        elif kind == "sample":
            samples.add(int(rest[0]))
        elif kind == "claimed":
            claimed.update(int(x) for x in rest)
    return samples, claimed


@pytest.mark.parametrize("kill_points", [(20, 57, 133)])
def test_sigkill_loses_nothing_committed(tmp_path, kill_points):
    path = tmp_path / "store.db"
    all_samples: set[int] = set()
    all_claimed: set[int] = set()
    for round_, kill_after in enumerate(kill_points, start=1):
        lines = run_and_kill(path, round_, kill_after)

        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.close()

        store = ConversationStore(path)
        samples, claimed = check_reported_rows(store, lines)
        all_samples |= samples
        all_claimed |= claimed
        rows = dict(store._conn.execute("SELECT id, state FROM samples").fetchall())
        assert all_samples <= set(rows), "a reported sample is missing"
        assert all(rows[s] == "in_batch" for s in all_claimed), "a reported claim was lost"
        store.close()

    # after the crashes the store works normally: claims go back to the queue and are claimable again
    store = ConversationStore(path)
    stats = store.stats()
    assert stats["samples"]["in_batch"] >= len(all_claimed) > 0
    released = store.release_untrained()
    assert released == stats["samples"]["in_batch"]
    pending = store.count_pending_samples()
    batch = store.claim_samples(batch_id=99, n=pending)
    assert len({s["sample_id"] for s in batch}) == pending >= len(all_samples)
    assert store.mark_trained(99) == pending
    store.close()
