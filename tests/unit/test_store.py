"""The durable store: every API the proxy and trainer use, claim semantics, and concurrency."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sqlite3
import threading
import time
import zlib

import pytest

from slime.conversation.store import ConversationStore, TurnRow

T0 = 1_700_000_000.0


@pytest.fixture()
def store(tmp_path):
    s = ConversationStore(tmp_path / "store.db")
    yield s
    s.close()


def add_turn(store, session="s1", *, turn_type="main", status="awaiting_next_state", now=T0, **kw) -> TurnRow:
    fields = dict(
        session_id=session, turn_type=turn_type, turn_reason="header", now=now, status=status,
        request={"messages": [{"role": "user", "content": "hi"}], "tools": None, "temperature": 0.7},
        response_message={"role": "assistant", "content": "hello"},
        prompt_ids=[1, 2, 3], response_ids=[4, 5], response_logprobs=[-0.1, -2.5],
        weight_version="v0", finish_reason="stop", trace_id="tr", fingerprints=["fp1", "fp2"],
    )
    fields.update(kw)
    return store.add_turn(**fields)


def add_pending(store, n, *, session="s1", start=T0) -> list[int]:
    """n turns, each with a pending sample created one second apart; returns sample ids."""
    ids = []
    for i in range(n):
        turn = add_turn(store, session, now=start + i)
        ids.append(store.add_sample(turn.id, {"index": i, "tokens": [1, 2]}, reward=1.0, now=start + i))
    return ids


# --- opening -------------------------------------------------------------------------------------------

def test_open_sets_wal_and_survives_reopen(tmp_path):
    path = tmp_path / "store.db"
    s = ConversationStore(path)
    assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    turn = add_turn(s)
    s.close()
    s = ConversationStore(path)  # re-running the schema is a no-op
    assert s.get_turn(turn.id) == turn
    assert s._conn.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1
    s.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "store.db"
    ConversationStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = 999")
    conn.commit()
    conn.close()
    with pytest.raises(RuntimeError, match="newer"):
        ConversationStore(path)


# --- sessions ------------------------------------------------------------------------------------------

def test_sessions_idle_and_finalize(store):
    store.touch_session("a", "header", now=T0)
    store.touch_session("b", "inferred", now=T0 + 50)
    assert store.idle_sessions(100, now=T0 + 120) == ["a"]
    assert store.idle_sessions(100, now=T0 + 200) == ["a", "b"]
    store.touch_session("a", "other", now=T0 + 150)  # activity resets the idle clock
    assert store.idle_sessions(100, now=T0 + 200) == ["b"]
    store.finalize_session("b", "idle", now=T0 + 200)
    assert store.idle_sessions(100, now=T0 + 1000) == ["a"]
    # a finalized session that speaks again is active again (its new last turn must be finalized later)
    add_turn(store, "b", now=T0 + 300)
    assert store.idle_sessions(100, now=T0 + 1000) == ["a", "b"]
    source = store._conn.execute("SELECT source FROM sessions WHERE id = 'a'").fetchone()[0]
    assert source == "header"  # the first known source is kept


# --- turns ---------------------------------------------------------------------------------------------

def test_add_turn_round_trip(store):
    turn = add_turn(store, response_logprobs=[-0.123456789012345, -1e-12, 0.0], response_ids=[7, 8, 9],
                    prompt_ids=[0, 151643, 2**31 - 1],
                    response_message={"role": "assistant", "content": None, "reasoning_content": "hm",
                                      "tool_calls": [{"id": "c1", "type": "function",
                                                      "function": {"name": "f", "arguments": "{}"}}]})
    assert turn.turn_num == 1 and turn.status == "awaiting_next_state" and turn.created == T0
    got = store.get_turn(turn.id)
    assert got == turn  # lossless, including float64 log-probs
    assert got.next_state is None and got.judgement is None and got.exclusion_reason is None
    assert store.get_turn(turn.id + 100) is None
    assert store.idle_sessions(0, now=T0) == ["s1"]  # add_turn touched the session


def test_turn_num_counts_every_turn_per_session(store):
    nums = [add_turn(store, "a").turn_num, add_turn(store, "a", turn_type="side", status="side").turn_num,
            add_turn(store, "b").turn_num, add_turn(store, "a").turn_num]
    assert nums == [1, 2, 1, 3]


def test_demonstrations_count_down_and_leave_the_main_numbers_alone(store):
    """A teacher demonstration is stored as a turn of the session, numbered -1, -2, ...: the turns the user saw
    keep the numbers 1, 2, 3 that feedback refers to, and `judged` counts only those."""
    first = add_turn(store, "a")
    demo = add_turn(store, "a", turn_type="demonstration", status="judged", fingerprints=[])
    second = add_turn(store, "a")
    other = add_turn(store, "a", turn_type="demonstration", status="judged", fingerprints=[])
    assert [first.turn_num, demo.turn_num, second.turn_num, other.turn_num] == [1, -1, 2, -2]
    assert add_turn(store, "b", turn_type="demonstration", status="judged").turn_num == -1
    assert store.find_turn("a", -2).id == other.id and store.find_turn("a").id == second.id
    store.set_judgement(demo.id, {"score": 0.0, "votes": [], "judge": "demonstration", "failed": False})
    store.add_sample(demo.id, {"r": 0.0}, 0.0)
    stats = store.stats()
    assert stats["judged"] == 0 and stats["turns"]["demonstration"] == 3 and stats["samples"]["pending"] == 1


def test_turn_num_unique_under_threads(store):
    def worker():
        for _ in range(20):
            add_turn(store, "shared")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    nums = [r[0] for r in store._conn.execute("SELECT turn_num FROM turns WHERE session_id = 'shared'")]
    assert sorted(nums) == list(range(1, 81))


def test_open_turns_latest_and_transitions(store):
    t1 = add_turn(store)
    t2 = add_turn(store)
    side = add_turn(store, turn_type="side", status="side")
    add_turn(store, "other")
    assert [t.id for t in store.open_turns("s1")] == [t1.id, t2.id]
    assert store.latest_main_turn("s1").id == t2.id  # side turns never count as the main line
    assert store.latest_main_turn("nobody") is None

    store.set_next_state(t1.id, [{"role": "tool", "content": "42"}], "request")
    assert [t.id for t in store.open_turns("s1")] == [t2.id]
    assert [t.id for t in store.turns_to_judge()] == [t1.id]
    got = store.get_turn(t1.id)
    assert got.status == "judging" and got.next_state == [{"role": "tool", "content": "42"}]
    assert got.next_state_source == "request"

    store.set_judgement(t1.id, {"score": 1.0, "votes": [], "judge": "rules", "failed": False})
    assert store.get_turn(t1.id).status == "judged" and store.turns_to_judge() == []

    # feedback after judging: appended, judged again, the stale judgement is gone
    store.append_next_state(t1.id, [{"role": "user", "content": "thanks!"}], "feedback")
    got = store.get_turn(t1.id)
    assert got.status == "judging" and got.judgement is None
    assert got.next_state_source == "request+feedback"
    assert [m["content"] for m in got.next_state] == ["42", "thanks!"]
    store.append_next_state(t1.id, [{"role": "user", "content": "more"}], "feedback")
    assert store.get_turn(t1.id).next_state_source == "request+feedback"

    # append to a turn that had no next state yet
    store.append_next_state(t2.id, [{"role": "user", "content": "good"}], "feedback")
    assert store.get_turn(t2.id).next_state_source == "feedback"

    store.set_status(t2.id, "excluded", "no_next_state")
    assert (store.get_turn(t2.id).status, store.get_turn(t2.id).exclusion_reason) == ("excluded", "no_next_state")
    store.set_status(t2.id, "superseded")
    assert (store.get_turn(t2.id).status, store.get_turn(t2.id).exclusion_reason) == ("superseded", None)
    assert store.get_turn(side.id).status == "side"


def test_updates_of_unknown_turns_raise(store):
    for call in (lambda: store.set_next_state(99, [], "request"),
                 lambda: store.append_next_state(99, [], "feedback"),
                 lambda: store.set_judgement(99, {"score": 0}),
                 lambda: store.set_status(99, "aborted"),
                 lambda: store.add_sample(99, {}, 0.0)):
        with pytest.raises(KeyError):
            call()


def test_large_request_round_trip_is_compressed(store):
    system = "".join(f"## Tool {i}\nUse tool_{i} when the user asks about topic {i}. " * 3 for i in range(400))
    assert len(system) > 60_000
    request = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "héllo ✓"}],
               "tools": [{"type": "function", "function": {"name": f"tool_{i}", "parameters": {}}} for i in range(50)],
               "stream": True}
    turn = add_turn(store, request=request)
    assert store.get_turn(turn.id).request == request
    (stored,) = store._conn.execute("SELECT length(request) FROM turn_payloads WHERE turn_id = ?",
                                    (turn.id,)).fetchone()
    assert stored < len(json.dumps(request)) / 5


# --- samples -------------------------------------------------------------------------------------------

def test_add_sample_rules(store):
    turn = add_turn(store)
    sid = store.add_sample(turn.id, {"response": "a"}, reward=1.0, now=T0)
    assert store.get_turn(turn.id).status == "sampled"
    assert store.count_pending_samples() == 1
    # re-adding while pending replaces it (same queue entry, new content)
    assert store.add_sample(turn.id, {"response": "b"}, reward=-1.0, now=T0 + 1) == sid
    assert store.count_pending_samples() == 1
    batch = store.claim_samples(batch_id=1, n=1)
    assert batch == [{"response": "b", "sample_id": sid}]
    with pytest.raises(ValueError, match="in_batch"):
        store.add_sample(turn.id, {"response": "c"}, reward=1.0)
    store.mark_trained(1)
    with pytest.raises(ValueError, match="trained"):
        store.add_sample(turn.id, {"response": "c"}, reward=1.0)


def test_pending_sample_follows_its_turn(store):
    # excluded after sampling (two tasks of the proxy finishing in either order): the sample is withdrawn
    t1 = add_turn(store)
    store.add_sample(t1.id, {"a": 1}, 1.0)
    store.set_status(t1.id, "excluded", "neutral")
    assert store.count_pending_samples() == 0 and not store.sample_is_pending(t1.id)
    store.add_sample(t1.id, {"a": 2}, 1.0)  # and the other order: sampled last means sampled
    assert store.get_turn(t1.id).status == "sampled" and store.count_pending_samples() == 1
    # a new next state means a new judgement: the stale sample must not be trained meanwhile
    store.append_next_state(t1.id, [{"role": "user", "content": "no!"}], "feedback")
    assert store.count_pending_samples() == 0
    t2 = add_turn(store)
    store.add_sample(t2.id, {}, 1.0)
    store.set_next_state(t2.id, [{"role": "user", "content": "x"}], "request")
    assert store.count_pending_samples() == 0
    # a sample already in a batch is history: it stays, and the turn cannot be sampled again
    store.add_sample(t2.id, {}, 1.0)
    store.claim_samples(1, 1)
    store.set_status(t2.id, "excluded", "late")
    assert store.stats()["samples"]["in_batch"] == 1
    with pytest.raises(ValueError):
        store.add_sample(t2.id, {}, 1.0)


def test_claim_is_all_or_nothing_and_keeps_the_surplus(store):
    ids = add_pending(store, 5)
    assert store.claim_samples(batch_id=1, n=6) is None
    assert store.count_pending_samples() == 5  # nothing was claimed
    batch = store.claim_samples(batch_id=1, n=3)
    assert [s["sample_id"] for s in batch] == ids[:3]  # the oldest
    assert [s["index"] for s in batch] == [0, 1, 2]
    assert store.count_pending_samples() == 2  # the surplus waits for the next batch, never dropped
    assert store.claim_samples(batch_id=2, n=3) is None
    ids += add_pending(store, 1, start=T0 + 100)
    assert [s["sample_id"] for s in store.claim_samples(batch_id=2, n=3)] == ids[3:6]
    assert store.count_pending_samples() == 0
    with pytest.raises(ValueError):
        store.claim_samples(batch_id=3, n=0)


def test_claim_orders_by_age_not_insertion(store):
    late = add_pending(store, 1, session="a", start=T0 + 10)
    early = add_pending(store, 1, session="b", start=T0)
    assert [s["sample_id"] for s in store.claim_samples(1, 1)] == early
    assert [s["sample_id"] for s in store.claim_samples(2, 1)] == late


def test_release_and_mark_trained(store):
    ids = add_pending(store, 6)
    store.claim_samples(1, 2)
    store.claim_samples(2, 2)
    store.claim_samples(3, 2)
    assert store.mark_trained(1) == 2
    assert store.mark_trained(1) == 0  # idempotent
    assert store.release_untrained(from_batch_id=3) == 2
    assert store.count_pending_samples() == 2
    assert store.release_untrained() == 2  # everything else still in a batch (batch 2)
    assert store.mark_trained(2) == 0  # released samples are no longer part of batch 2
    # released samples keep their age: they are claimed first, in order
    assert [s["sample_id"] for s in store.claim_samples(4, 4)] == ids[2:]
    assert store.stats()["samples"] == {"pending": 0, "in_batch": 4, "trained": 2, "exported": 0}


# --- feedback, stats, export ---------------------------------------------------------------------------

def test_stats_numbers(store):
    store.touch_session("empty", "header", now=T0)
    turns = [add_turn(store, "s1") for _ in range(4)] + [add_turn(store, "s2")]
    add_turn(store, "s1", turn_type="side", status="side")
    store.finalize_session("s2", "idle")
    for t, reward in zip(turns[:3], (1.0, -1.0, 0.0)):
        store.set_next_state(t.id, [{"role": "user", "content": "x"}], "request")
        store.set_judgement(t.id, {"score": reward, "votes": [], "judge": "llm", "failed": reward == 0.0})
        store.add_sample(t.id, {"r": reward}, reward)
    store.set_status(turns[3].id, "excluded", "neutral")
    store.set_status(turns[4].id, "excluded", "neutral")
    store.claim_samples(1, 1)
    store.add_feedback("s1", turns[0].id, 1, "great")
    store.add_feedback("s1", None, None, "meh")

    assert store.stats() == {
        "sessions": {"total": 3, "active": 2, "finalized": 1},
        "turns": {"main": 5, "side": 1, "demonstration": 0, "by_status": {"sampled": 3, "excluded": 2, "side": 1}},
        "judged": 3,
        "judge_failures": 1,
        "samples": {"pending": 2, "in_batch": 1, "trained": 0, "exported": 0},
        "trained_batches": 0,
        "excluded": {"neutral": 2},
        "rewards": {"-1": 1, "0": 1, "1": 1, "mean": 0.0},
        "feedback": 2,
        "traces": {"total": 0, "pending": 0, "awaiting_feedback": 0, "judging": 0, "positive": 0, "negative": 0,
                   "neutral": 0, "excluded": 0, "trained": 0},
    }
    store.mark_trained(1)
    store.claim_samples(2, 1)
    store.mark_trained(2)
    assert store.stats()["samples"] == {"pending": 1, "in_batch": 0, "trained": 2, "exported": 0}
    assert store.stats()["trained_batches"] == 2


def test_stats_of_empty_store(store):
    stats = store.stats()
    assert stats["rewards"] == {"-1": 0, "0": 0, "1": 0, "mean": None}
    assert stats["samples"] == {"pending": 0, "in_batch": 0, "trained": 0, "exported": 0}
    json.dumps(stats)  # served as JSON by the proxy


def test_export_round_trip(store, tmp_path):
    msgs = [{"role": "user", "content": "Grüße, 你好 👋"}]
    t1 = add_turn(store, request={"messages": msgs, "tools": None}, now=T0,
                  response_message={"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]})
    add_turn(store, request={"messages": msgs, "tools": None}, now=T0 + 1)
    add_turn(store, turn_type="side", status="side")  # not exported
    store.set_next_state(t1.id, [{"role": "tool", "content": "ça va"}], "request")
    votes = [{"score": 1, "rationale": "gut", "source": "llm", "error": None, "seconds": 0.5}]
    store.set_judgement(t1.id, {"score": 1.0, "votes": votes, "judge": "llm", "rationale": "gut",
                                "failed": False, "extras": {}})

    conv, judg = tmp_path / "conversations.jsonl", tmp_path / "judgements.jsonl"
    assert store.export_jsonl(conv, judg) == (2, 1)
    text = conv.read_text(encoding="utf-8")
    assert "你好 👋" in text  # ensure_ascii=False
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {
        "session_id": "s1", "turn": 1, "timestamp": "2023-11-14T22:13:20+00:00", "messages": msgs,
        "response": {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
        "tool_calls": [{"id": "c"}], "next_state": [{"role": "tool", "content": "ça va"}],
        "status": "judged", "weight_version": "v0",
    }
    assert lines[1]["turn"] == 2 and lines[1]["tool_calls"] is None and lines[1]["next_state"] is None
    assert [json.loads(line) for line in judg.read_text(encoding="utf-8").splitlines()] == [
        {"session_id": "s1", "turn": 1, "score": 1.0, "votes": votes, "rationale": "gut", "judge": "llm",
         "failed": False}]
    # written beside their targets and renamed into place: no temporary file is left
    assert {"conversations.jsonl", "judgements.jsonl"} <= {p.name for p in tmp_path.iterdir()}
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# --- concurrency ---------------------------------------------------------------------------------------

def _claim_until_empty(store, batch_base, n, out):
    batch = batch_base
    while True:
        got = store.claim_samples(batch, n)
        if got is None:
            return
        out.extend(s["sample_id"] for s in got)
        batch += 1


def test_threads_never_claim_the_same_sample(store):
    ids = add_pending(store, 200)
    results: list[list[int]] = [[], [], []]
    threads = [threading.Thread(target=_claim_until_empty, args=(store, 1000 * (i + 1), 2, results[i]))
               for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    claimed = [sid for r in results for sid in r]
    assert len(claimed) == len(set(claimed)) == 200 and set(claimed) == set(ids)


def _claimer_process(path, batch_base, barrier, queue):
    store = ConversationStore(path)
    out: list[int] = []
    barrier.wait(timeout=60)  # start claiming together, so the claims really interleave
    _claim_until_empty(store, batch_base, 1, out)
    store.close()
    queue.put(out)


def test_processes_never_claim_the_same_sample(store):
    ids = add_pending(store, 600)
    ctx = multiprocessing.get_context("spawn")  # no inherited connection or lock state
    queue, barrier = ctx.Queue(), ctx.Barrier(2)
    procs = [ctx.Process(target=_claimer_process, args=(store.path, 1000 * (i + 1), barrier, queue))
             for i in range(2)]
    for p in procs:
        p.start()
    # this process keeps writing while the others claim: writers and claimers must not deadlock
    for i in range(20):
        add_turn(store, "writer", now=T0 + 10_000 + i)
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    claimed = [sid for r in results for sid in r]
    assert len(claimed) == len(set(claimed)) == 600 and set(claimed) == set(ids)
    assert all(results), "both processes should have claimed something"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_two_thousand_sessions_stay_small(store, tmp_path):
    # an agent's system prompt is ~60 KB (~15k tokens) and identical across sessions; every request carries it
    system = "".join(f"Rule {i}: always check the file system before answering about project {i}. "
                     for i in range(820))
    assert len(system) > 60_000
    # word-level stand-in for a tokenizer: repeated words give repeated ids, as real token ids do
    prompt_ids = [zlib.crc32(piece.encode()) % 151_000 for piece in re.findall(r"\w+|\W", system)][:15_000]
    assert len(prompt_ids) == 15_000
    rss_before = _rss_bytes()
    start = time.perf_counter()
    for s in range(2000):
        request = {"messages": [{"role": "system", "content": system},
                                {"role": "user", "content": f"question {s}"}], "tools": None}
        turn = add_turn(store, f"session-{s}", request=request, prompt_ids=prompt_ids,
                        response_ids=list(range(200)), response_logprobs=[-0.5] * 200, now=T0 + s)
        store.set_next_state(turn.id, [{"role": "user", "content": "ok"}], "request")
    elapsed = time.perf_counter() - start
    rss_growth = _rss_bytes() - rss_before
    assert store.stats()["sessions"]["total"] == 2000
    assert len(store.idle_sessions(0, now=T0 + 5000)) == 2000
    assert store.get_turn(turn.id).prompt_ids == prompt_ids
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = (tmp_path / "store.db").stat().st_size
    # raw, that is 2,000 x (60 KB request + 60 KB of int32 prompt ids) = 240 MB
    assert size < 60e6, size
    assert rss_growth < 100e6, rss_growth  # nothing is kept in memory per session
    assert elapsed < 60, elapsed
    print(f"2000 sessions: {elapsed:.1f} s, {size / 1e6:.1f} MB on disk, RSS +{rss_growth / 1e6:.1f} MB")


# --- lookups used by the feedback endpoint -------------------------------------------------------------

def test_find_turn_and_sample_is_pending(store):
    t1 = add_turn(store)
    side = add_turn(store, turn_type="side", status="side")
    t3 = add_turn(store)
    assert store.find_turn("s1", 1).id == t1.id
    assert store.find_turn("s1", 2).id == side.id  # numbers count every turn, so lookups do too
    assert store.find_turn("s1", None).id == t3.id  # no number: the latest main-line turn
    assert store.find_turn("s1", 4) is None and store.find_turn("nobody") is None
    assert [t.id for t in store.recent_turns(2)] == [t3.id, side.id]
    assert not store.sample_is_pending(t1.id)
    store.add_sample(t1.id, {}, 1.0)
    assert store.sample_is_pending(t1.id)
    store.claim_samples(1, 1)
    assert not store.sample_is_pending(t1.id)


# --- CLI -----------------------------------------------------------------------------------------------

def _filled_store(path) -> None:
    with ConversationStore(path) as s:
        t = add_turn(s, request={"messages": [{"role": "user", "content": "naïve ✓"}], "tools": None})
        s.set_next_state(t.id, [{"role": "user", "content": "ok"}], "request")
        s.set_judgement(t.id, {"score": 1.0, "votes": [], "judge": "rules", "failed": False})
        s.add_sample(t.id, {}, 1.0)
        s.set_status(add_turn(s).id, "excluded", "no_next_state")


def test_cli_stats_and_export(tmp_path, capsys):
    from slime.conversation.__main__ import main

    path = tmp_path / "store.db"
    _filled_store(path)
    assert main(["stats", "--store", str(path)]) == 0
    table = capsys.readouterr().out
    assert "1 pending, 0 in batch, 0 trained" in table and "no_next_state" in table and "mean: +1.000" in table
    assert main(["stats", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["samples"]["pending"] == 1

    out = tmp_path / "export"
    assert main(["export", "--store", str(path), "--out", str(out)]) == 0
    assert "2 turns" in capsys.readouterr().out
    assert "naïve ✓" in (out / "conversations.jsonl").read_text(encoding="utf-8")
    assert len((out / "judgements.jsonl").read_text(encoding="utf-8").splitlines()) == 1


def test_cli_errors_are_messages_not_tracebacks(tmp_path, capsys):
    from slime.conversation.__main__ import main

    missing = tmp_path / "nope.db"
    assert main(["stats", "--store", str(missing)]) == 2
    assert "store file not found" in capsys.readouterr().err
    assert not missing.exists()  # a typo must not create an empty store
    assert main(["export", "--store", str(missing), "--out", str(tmp_path)]) == 2
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database" * 100)
    assert main(["stats", "--store", str(junk)]) == 2
    assert "cannot open store" in capsys.readouterr().err
    assert main(["stats"]) == 2  # neither --store nor --url
    assert main(["stats", "--url", "http://127.0.0.1:9"]) == 2
    assert "cannot reach" in capsys.readouterr().err


def test_cli_stats_from_url(tmp_path, capsys):
    from helpers.fake_http import fake_json_server
    from slime.conversation.__main__ import main

    path = tmp_path / "store.db"
    _filled_store(path)
    with ConversationStore(path) as s:
        body = {**s.stats(), "proxy": {"judging_now": 3}}
    with fake_json_server(lambda p: (200 if p == "/v1/stats" else 404, body)) as (url, seen):
        assert main(["stats", "--url", url + "/", "--api-key", "k"]) == 0
    assert seen == [("/v1/stats", "Bearer k")]
    table = capsys.readouterr().out
    assert "1 pending" in table and "judging_now" in table


def test_cli_serve_forwards_argv(monkeypatch):
    import sys
    import types

    from slime.conversation.__main__ import main

    calls = []
    fake = types.ModuleType("slime.conversation.proxy")
    fake.main = lambda argv: calls.append(argv) or 0
    monkeypatch.setitem(sys.modules, "slime.conversation.proxy", fake)
    assert main(["serve", "--port", "1234", "--store", "x.db"]) == 0
    assert calls == [["--port", "1234", "--store", "x.db"]]


def test_one_trainer_holds_the_lease_and_a_second_is_refused_until_it_expires(store):
    from slime.conversation.store import LeaseLost

    assert store.acquire_trainer_lease("A", "host1", 11, ttl=60, now=T0) is None
    holder = store.acquire_trainer_lease("B", "host2", 22, ttl=60, now=T0 + 30)
    assert holder["owner"] == "A" and holder["host"] == "host1" and holder["pid"] == 11
    assert store.acquire_trainer_lease("A", "host1", 11, ttl=60, now=T0 + 31) is None  # its own lease: kept
    ids = add_pending(store, 4)
    assert len(store.claim_samples(0, 2, owner="A")) == 2
    with pytest.raises(LeaseLost, match="B no longer holds"):
        store.claim_samples(1, 2, owner="B")
    # A's process is gone (same host, says the caller's check): B may take over at once
    assert store.acquire_trainer_lease("B", "host1", 22, ttl=60, holder_is_gone=lambda h: h["pid"] == 11,
                                       now=T0 + 40) is None
    with pytest.raises(LeaseLost, match="A no longer holds.*held by B"):
        store.mark_trained(0, owner="A")  # the old trainer can no longer mark what it claimed
    assert store.renew_trainer_lease("A") is False and store.renew_trainer_lease("B", now=T0 + 50) is True
    # B stops renewing: after the TTL, C takes over; B's claims fail from then on
    assert store.acquire_trainer_lease("C", "host3", 33, ttl=60, now=T0 + 100)["owner"] == "B"
    assert store.acquire_trainer_lease("C", "host3", 33, ttl=60, now=T0 + 111) is None
    assert store.release_untrained(0) == 2  # the new trainer hands the dead one's batch back ...
    assert sorted(s["sample_id"] for s in store.claim_samples(5, 4, owner="C")) == sorted(ids)  # ... once
    store.release_trainer_lease("C")
    assert store.acquire_trainer_lease("D", "host4", 44, ttl=60, now=T0 + 112) is None
    store.release_untrained(0)
    exported = store.claim_for_export(-7, "D", limit=3)  # a collector's claim: a negative batch id
    assert len(exported) == 3 and store.release_untrained(0) == 0  # not a trainer's batch ...
    assert store.release_untrained() == 3  # ... but every claim goes back when asked for all
    assert store.mark_exported(-7, "D") == 0
