"""The durable store: sessions, turns, judgements, training samples and feedback in one SQLite file.

Everything the proxy collects lands here before anything else happens to it, so a crash or a restart
loses nothing (upstream kept all of it in memory and truncated its JSONL logs at every pause).
JSONL is an export (`export_jsonl`), not the source of truth.

Concurrency: the proxy process writes turns, judgements and samples while the trainer process claims
samples from the same file. WAL mode lets readers and one writer proceed together; every write runs in
`BEGIN IMMEDIATE`, which takes the write lock up front, so a claim (select + update) is atomic across
processes and never fails half-way with SQLITE_BUSY on a lock upgrade. Inside one process, threads share
one connection guarded by a lock.

Samples leave the queue only by being claimed: `claim_samples` takes exactly the n oldest pending samples
and leaves the rest pending for the next batch (upstream drained the queue and dropped the surplus).
A trainer that dies mid-batch hands its claims back with `release_untrained`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
import zlib
from array import array
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator

from slime.conversation import store_backends

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT,
    created REAL NOT NULL,
    last_seen REAL NOT NULL,
    finalized REAL,             -- NULL while the session is active
    finalize_reason TEXT
);
CREATE INDEX IF NOT EXISTS sessions_active_last_seen ON sessions(last_seen) WHERE finalized IS NULL;
CREATE TABLE IF NOT EXISTS turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    turn_num INTEGER NOT NULL,
    turn_type TEXT NOT NULL,
    turn_reason TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    response_message TEXT NOT NULL,     -- JSON
    weight_version TEXT,
    finish_reason TEXT,
    trace_id TEXT,
    fingerprints TEXT NOT NULL,         -- JSON list
    next_state TEXT,                    -- JSON list of messages
    next_state_source TEXT,
    judgement TEXT,                     -- JSON (Judgement.to_dict())
    exclusion_reason TEXT,
    UNIQUE (session_id, turn_num)
);
-- Written once, read rarely, and large: kept out of `turns` because SQLite rewrites a whole row on every
-- UPDATE, and a turn's status changes several times.
CREATE TABLE IF NOT EXISTS turn_payloads (
    turn_id INTEGER PRIMARY KEY REFERENCES turns(id),
    request BLOB NOT NULL,              -- zlib(JSON): agent system prompts make these 60 KB
    prompt_ids BLOB NOT NULL,           -- zlib(int32 little-endian): ~5x smaller, 0.6 ms per 15k tokens
    response_ids BLOB NOT NULL,         -- zlib(int32 little-endian)
    response_logprobs BLOB NOT NULL     -- float64 little-endian: lossless, 20x faster than JSON
);
CREATE INDEX IF NOT EXISTS turns_session_type ON turns(session_id, turn_type);
CREATE INDEX IF NOT EXISTS turns_status ON turns(status);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id INTEGER NOT NULL UNIQUE REFERENCES turns(id),
    created REAL NOT NULL,
    state TEXT NOT NULL,                -- pending | in_batch | trained | exported (to a rollout directory)
    batch_id INTEGER,
    reward REAL NOT NULL,
    data BLOB NOT NULL                  -- zlib(JSON) of Sample.to_dict()
);
CREATE INDEX IF NOT EXISTS samples_state_age ON samples(state, created, id);
CREATE INDEX IF NOT EXISTS samples_batch ON samples(batch_id);
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_id INTEGER REFERENCES turns(id),
    rating INTEGER,
    text TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_session ON feedback(session_id);
-- the one trainer that may claim samples: a lease it renews, and another trainer is refused while it is live
CREATE TABLE IF NOT EXISTS trainer_lease (
    name TEXT PRIMARY KEY,              -- always 'trainer'
    owner TEXT NOT NULL,                -- host:pid:random, unique per trainer process
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    acquired REAL NOT NULL,
    heartbeat REAL NOT NULL
);
-- traces another app's model wrote (POST /v1/traces): the trace id is the client's idempotency key
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    turn_id INTEGER NOT NULL UNIQUE REFERENCES turns(id),
    created REAL NOT NULL,
    task TEXT,
    model TEXT,
    meta TEXT NOT NULL                  -- JSON: task, model, profile, note, explicit reward
);
"""

_TURN_COLUMNS = (
    "t.id, t.session_id, t.turn_num, t.turn_type, t.turn_reason, t.status, t.created, p.request, "
    "t.response_message, p.prompt_ids, p.response_ids, p.response_logprobs, t.weight_version, t.finish_reason, "
    "t.trace_id, t.fingerprints, t.next_state, t.next_state_source, t.judgement, t.exclusion_reason"
)
_TURN_FROM = "turns t JOIN turn_payloads p ON p.turn_id = t.id"
_SESSION_COLUMNS = "id, source, created, last_seen, finalized, finalize_reason"
PREVIEW_CHARS = 200  # response preview length in `session_detail`


@dataclass
class TurnRow:
    id: int
    session_id: str
    turn_num: int
    turn_type: str
    turn_reason: str
    status: str
    created: float
    request: dict  # {"messages": [...], "tools": [...] or None, plus other request params}
    response_message: dict  # assistant message {"role","content","tool_calls"?, "reasoning_content"?}
    prompt_ids: list[int]
    response_ids: list[int]
    response_logprobs: list[float]
    weight_version: str | None
    finish_reason: str | None
    trace_id: str | None
    fingerprints: list[str]  # history fingerprints of prompt+response (used to match the next request)
    next_state: list[dict] | None
    next_state_source: str | None  # "request" | "feedback" | "request+feedback"
    judgement: dict | None  # Judgement.to_dict()
    exclusion_reason: str | None


# --- payload encoding -------------------------------------------------------------------------------

def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _zjson(value: Any) -> bytes:
    return zlib.compress(_json(value).encode("utf-8"), 6)


def _unzjson(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob))


def _pack(typecode: str, values) -> bytes:
    arr = array(typecode, values)
    if sys.byteorder != "little":  # keep the file portable: blobs are always little-endian
        arr.byteswap()
    return arr.tobytes()


def _unpack(typecode: str, blob: bytes) -> list:
    arr = array(typecode)
    arr.frombytes(blob)
    if sys.byteorder != "little":
        arr.byteswap()
    return arr.tolist()


def _pack_ids(ids) -> bytes:
    return zlib.compress(_pack("i", ids), 1)


def _unpack_ids(blob: bytes) -> list[int]:
    return _unpack("i", zlib.decompress(blob))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _turn_from_row(row: tuple) -> TurnRow:
    return TurnRow(
        id=row[0], session_id=row[1], turn_num=row[2], turn_type=row[3], turn_reason=row[4],
        status=row[5], created=row[6], request=_unzjson(row[7]), response_message=json.loads(row[8]),
        prompt_ids=_unpack_ids(row[9]), response_ids=_unpack_ids(row[10]),
        response_logprobs=_unpack("d", row[11]), weight_version=row[12], finish_reason=row[13],
        trace_id=row[14], fingerprints=json.loads(row[15]), next_state=_loads(row[16]),
        next_state_source=row[17], judgement=_loads(row[18]), exclusion_reason=row[19],
    )


def _turn_detail(row: tuple) -> dict:
    """One row of `session_detail`: the turn's bookkeeping, its judgement in brief, a preview of its reply."""
    (turn_id, turn_num, turn_type, reason, status, exclusion, judgement, sample_state, reward, version, created,
     finish_reason, next_state_source, response, prompt_blob, response_blob) = row
    judgement = _loads(judgement)
    message = json.loads(response)
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts: their text
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return {
        "turn_id": turn_id, "turn_num": turn_num, "type": turn_type, "reason": reason, "status": status,
        "exclusion_reason": exclusion,
        "score": None if judgement is None else judgement.get("score"),
        "judge": None if judgement is None else judgement.get("judge"),
        "judge_failed": None if judgement is None else bool(judgement.get("failed", False)),
        "votes": None if judgement is None else [v.get("score") for v in judgement.get("votes", [])],
        "sample_state": sample_state, "reward": reward, "weight_version": version, "created": created,
        "finish_reason": finish_reason, "next_state_source": next_state_source,
        # int32 ids: the decompressed blob's length says how many without decoding them
        "prompt_tokens": len(zlib.decompress(prompt_blob)) // 4,
        "response_tokens": len(zlib.decompress(response_blob)) // 4,
        "response_preview": str(content or "")[:PREVIEW_CHARS],
        "tool_calls": [((c.get("function") or {}).get("name") if isinstance(c, dict) else None)
                       for c in calls] if isinstance(calls, list) and calls else [],
    }


def _merge_sources(old: str | None, new: str) -> str:
    """"request" + "feedback" -> "request+feedback"; repeats are not added twice."""
    parts = old.split("+") if old else []
    for part in new.split("+"):
        if part not in parts:
            parts.append(part)
    return "+".join(parts)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds")


def _connect(location: str):
    return store_backends.connect(location)


class LeaseLost(RuntimeError):
    """Another trainer took the store's trainer lease (this one stalled past the TTL)."""


class ConversationStore:
    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._conn = _connect(self.path)
        with self._write() as db:
            # statement by statement: executescript() would COMMIT our transaction
            for statement in store_backends.schema_statements(_SCHEMA, self.path):
                db.execute(statement)
            row = db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                raise RuntimeError(f"{self.path}: store schema v{row[0]} is newer than this code (v{SCHEMA_VERSION})")

    # --- plumbing ---------------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; the write lock is taken up front so multi-statement updates are atomic
        across processes."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several SELECTs see one snapshot."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "ConversationStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- sessions ---------------------------------------------------------------------------------

    @staticmethod
    def _touch(db: sqlite3.Connection, session_id: str, source: str | None, now: float) -> None:
        # A finalized session that speaks again is active again: its new last turn needs finalizing too.
        db.execute(
            "INSERT INTO sessions (id, source, created, last_seen) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen, "
            "source = COALESCE(sessions.source, excluded.source), finalized = NULL, finalize_reason = NULL",
            (session_id, source, now, now),
        )

    def touch_session(self, session_id: str, source: str | None, now: float | None = None) -> None:
        with self._write() as db:
            self._touch(db, session_id, source, time.time() if now is None else now)

    def idle_sessions(self, idle_seconds: float, now: float | None = None) -> list[str]:
        cutoff = (time.time() if now is None else now) - idle_seconds
        with self._lock:
            rows = self._conn.execute(
                "SELECT id FROM sessions WHERE finalized IS NULL AND last_seen <= ? ORDER BY last_seen",
                (cutoff,),
            ).fetchall()
        return [r[0] for r in rows]

    def finalize_session(self, session_id: str, reason: str, now: float | None = None) -> bool:
        """Mark the session ended; False when the store has no such session."""
        with self._write() as db:
            cursor = db.execute(
                "UPDATE sessions SET finalized = ?, finalize_reason = ? WHERE id = ?",
                (time.time() if now is None else now, reason, session_id),
            )
            return cursor.rowcount > 0

    # --- turns ------------------------------------------------------------------------------------

    def add_turn(self, *, session_id: str, turn_type: str, turn_reason: str, request: dict,
                 response_message: dict, prompt_ids: list[int], response_ids: list[int],
                 response_logprobs: list[float], weight_version: str | None, finish_reason: str | None,
                 trace_id: str | None, fingerprints: list[str], status: str,
                 now: float | None = None, session_source: str | None = None) -> TurnRow:
        """`session_source`: how the proxy identified the session ("header", "body", "runtime", "prefix");
        a session keeps the first one recorded."""
        now = time.time() if now is None else now
        # encode outside the lock: compressing a 60 KB request should not stall other threads
        payload = (_zjson(request), _pack_ids(prompt_ids), _pack_ids(response_ids), _pack("d", response_logprobs))
        turn = TurnRow(
            id=0, session_id=session_id, turn_num=0, turn_type=turn_type,
            turn_reason=turn_reason, status=status, created=now, request=request,
            response_message=response_message, prompt_ids=list(prompt_ids), response_ids=list(response_ids),
            response_logprobs=list(response_logprobs), weight_version=weight_version,
            finish_reason=finish_reason, trace_id=trace_id, fingerprints=list(fingerprints),
            next_state=None, next_state_source=None, judgement=None, exclusion_reason=None,
        )
        with self._write() as db:
            self._insert_turn(db, turn, payload, session_source)
        return turn

    def _insert_turn(self, db: sqlite3.Connection, turn: TurnRow, payload: tuple, session_source: str | None) -> None:
        """Writes `turn` (its id and number are allocated here and set on it) inside the caller's transaction."""
        self._touch(db, turn.session_id, session_source, turn.created)
        # allocated inside the write transaction, so two writers can never get the same number. Teacher
        # demonstrations count down from -1: the turns the user saw keep their numbers 1, 2, 3, ...
        (turn.turn_num,) = db.execute(
            "SELECT COALESCE(MIN(CASE WHEN turn_num < 0 THEN turn_num END), 0) - 1 FROM turns WHERE session_id = ?" if
            turn.turn_type == "demonstration" else
            "SELECT COALESCE(MAX(turn_num), 0) + 1 FROM turns WHERE session_id = ?", (turn.session_id,)
        ).fetchone()
        turn.id = db.execute(
            "INSERT INTO turns (session_id, turn_num, turn_type, turn_reason, status, created, response_message, "
            "weight_version, finish_reason, trace_id, fingerprints) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (turn.session_id, turn.turn_num, turn.turn_type, turn.turn_reason, turn.status, turn.created,
             _json(turn.response_message), turn.weight_version, turn.finish_reason, turn.trace_id,
             _json(turn.fingerprints)),
        ).lastrowid
        db.execute("INSERT INTO turn_payloads (turn_id, request, prompt_ids, response_ids, response_logprobs) "
                   "VALUES (?, ?, ?, ?, ?)", (turn.id, *payload))

    # --- traces (POST /v1/traces): turns another model wrote, stored once per trace id ----------------------

    def add_trace(self, trace_id: str, meta: dict, **turn) -> tuple[TurnRow, bool]:
        """One trace: see `add_traces`."""
        return self.add_traces([{"trace_id": trace_id, "meta": meta, **turn}])[0]

    def add_traces(self, items: list[dict], now: float | None = None) -> list[tuple[TurnRow, bool]]:
        """[(turn, created)] for items {trace_id, meta, session_id, request, response_message, prompt_ids,
        response_ids, fingerprints, status, next_state?}: each trace's main-line turn, written with its metadata,
        all in one transaction; or the turn an earlier request with the same trace id wrote (created False,
        nothing written for it)."""
        now = time.time() if now is None else now
        prepared = []
        for item in items:  # encoded outside the lock
            payload = (_zjson(item["request"]), _pack_ids(item["prompt_ids"]), _pack_ids(item["response_ids"]),
                       _pack("d", []))
            next_state = list(item.get("next_state") or []) or None
            turn = TurnRow(
                id=0, session_id=item["session_id"], turn_num=0, turn_type="main", turn_reason="trace",
                status=item["status"], created=now, request=item["request"], response_message=item["response_message"],
                prompt_ids=list(item["prompt_ids"]), response_ids=list(item["response_ids"]), response_logprobs=[],
                weight_version=None, finish_reason="stop", trace_id=None, fingerprints=list(item["fingerprints"]),
                next_state=next_state, next_state_source="trace" if next_state else None, judgement=None,
                exclusion_reason=None,
            )
            prepared.append((item, turn, payload))
        out: list[tuple[TurnRow | int, bool]] = []
        with self._write() as db:
            for item, turn, payload in prepared:
                row = db.execute("SELECT turn_id FROM traces WHERE trace_id = ?", (item["trace_id"],)).fetchone()
                if row is not None:
                    out.append((row[0], False))
                    continue
                self._insert_turn(db, turn, payload, "trace")
                if turn.next_state:
                    db.execute("UPDATE turns SET next_state = ?, next_state_source = 'trace' WHERE id = ?",
                               (_json(turn.next_state), turn.id))
                meta = item["meta"]
                db.execute("INSERT INTO traces (trace_id, turn_id, created, task, model, meta) VALUES (?, ?, ?, ?, ?, ?)",
                           (item["trace_id"], turn.id, now, meta.get("task"), meta.get("model"), _json(meta)))
                out.append((turn, True))
        return [(self.get_turn(t) if isinstance(t, int) else t, created) for t, created in out]

    def trace_turns(self, trace_ids: list[str]) -> dict[str, TurnRow]:
        """The stored turns of those trace ids that exist."""
        if not trace_ids:
            return {}
        with self._lock:
            pairs = self._conn.execute(
                f"SELECT trace_id, turn_id FROM traces WHERE trace_id IN ({','.join('?' * len(trace_ids))})",
                list(trace_ids)).fetchall()
        if not pairs:
            return {}
        by_turn = {t.id: t for t in self._select_turns(f"t.id IN ({','.join('?' * len(pairs))})",
                                                       tuple(turn_id for _, turn_id in pairs))}
        return {trace_id: by_turn[turn_id] for trace_id, turn_id in pairs}

    def trace_turn(self, trace_id: str) -> TurnRow | None:
        rows = self._select_turns("t.id = (SELECT turn_id FROM traces WHERE trace_id = ?)", (trace_id,))
        return rows[0] if rows else None

    def trace_stats(self) -> dict:
        """The trace loop's counts: traces waiting for a verdict, and judged ones by the sign of their score."""
        with self._read() as db:
            total, waiting, judging, excluded, pos, neg, neutral, trained = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(t.status = 'awaiting_next_state'), 0), "
                "COALESCE(SUM(t.status = 'judging'), 0), COALESCE(SUM(t.status = 'excluded'), 0), "
                "COALESCE(SUM(json_extract(t.judgement, '$.score') > 0), 0), "
                "COALESCE(SUM(json_extract(t.judgement, '$.score') < 0), 0), "
                "COALESCE(SUM(json_extract(t.judgement, '$.score') = 0), 0), "
                "COALESCE(SUM(s.state = 'trained'), 0) "
                "FROM traces x JOIN turns t ON t.id = x.turn_id LEFT JOIN samples s ON s.turn_id = t.id").fetchone()
        return {"total": total, "pending": waiting + judging, "awaiting_feedback": waiting, "judging": judging,
                "positive": pos, "negative": neg, "neutral": neutral, "excluded": excluded, "trained": trained}

    def _select_turns(self, where: str, params: tuple = ()) -> list[TurnRow]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {_TURN_COLUMNS} FROM {_TURN_FROM} WHERE {where}", params).fetchall()
        return [_turn_from_row(r) for r in rows]

    def get_turn(self, turn_id: int) -> TurnRow | None:
        rows = self._select_turns("t.id = ?", (turn_id,))
        return rows[0] if rows else None

    def open_turns(self, session_id: str) -> list[TurnRow]:
        return self._select_turns(
            "t.session_id = ? AND t.turn_type = 'main' AND t.status = 'awaiting_next_state' ORDER BY t.id",
            (session_id,),
        )

    def latest_main_turn(self, session_id: str) -> TurnRow | None:
        rows = self._select_turns("t.session_id = ? AND t.turn_type = 'main' ORDER BY t.id DESC LIMIT 1",
                                  (session_id,))
        return rows[0] if rows else None

    def find_turn(self, session_id: str, turn_num: int | None = None) -> TurnRow | None:
        """The session's turn with that number (of any type), or its latest main-line turn when None."""
        if turn_num is None:
            return self.latest_main_turn(session_id)
        rows = self._select_turns("t.session_id = ? AND t.turn_num = ?", (session_id, turn_num))
        return rows[0] if rows else None

    def recent_turns(self, limit: int) -> list[TurnRow]:
        """The last `limit` turns of all sessions and types, newest first (inspection and tests)."""
        return self._select_turns("TRUE ORDER BY t.id DESC LIMIT ?", (limit,))

    def turns_to_judge(self) -> list[TurnRow]:
        return self._select_turns("t.status = 'judging' ORDER BY t.id")

    def _update_turn(self, db: sqlite3.Connection, turn_id: int, sets: str, params: tuple) -> None:
        if db.execute(f"UPDATE turns SET {sets} WHERE id = ?", (*params, turn_id)).rowcount == 0:
            raise KeyError(f"no turn with id {turn_id}")

    @staticmethod
    def _withdraw_pending_sample(db: sqlite3.Connection, turn_id: int) -> None:
        # Keeps one invariant whatever order the proxy's tasks finish in: a pending sample exists only while
        # its turn is "sampled" with the judgement it was made from. Claimed or trained samples are history.
        db.execute("DELETE FROM samples WHERE turn_id = ? AND state = 'pending'", (turn_id,))

    def set_next_state(self, turn_id: int, messages: list[dict], source: str) -> None:
        # a new next state invalidates any judgement (and pending sample) made from an older one
        with self._write() as db:
            self._update_turn(db, turn_id, "next_state = ?, next_state_source = ?, judgement = NULL, "
                              "status = 'judging'", (_json(list(messages)), source))
            self._withdraw_pending_sample(db, turn_id)

    def append_next_state(self, turn_id: int, messages: list[dict], source: str) -> None:
        """Adds messages (e.g. explicit feedback) after the stored next state; the turn is judged again."""
        with self._write() as db:
            row = db.execute("SELECT next_state, next_state_source FROM turns WHERE id = ?", (turn_id,)).fetchone()
            if row is None:
                raise KeyError(f"no turn with id {turn_id}")
            merged = (_loads(row[0]) or []) + list(messages)
            self._update_turn(db, turn_id, "next_state = ?, next_state_source = ?, judgement = NULL, "
                              "status = 'judging'", (_json(merged), _merge_sources(row[1], source)))
            self._withdraw_pending_sample(db, turn_id)

    def set_judgement(self, turn_id: int, judgement: dict) -> None:
        with self._write() as db:
            self._update_turn(db, turn_id, "judgement = ?, status = 'judged'", (_json(judgement),))

    def set_status(self, turn_id: int, status: str, reason: str | None = None) -> None:
        """E.g. "excluded" with a reason. A turn that leaves "sampled" this way loses its pending sample
        (an exclusion decided after the sample was added wins); the reason belongs to the status set."""
        with self._write() as db:
            self._update_turn(db, turn_id, "status = ?, exclusion_reason = ?", (status, reason))
            if status != "sampled":
                self._withdraw_pending_sample(db, turn_id)

    # --- samples ----------------------------------------------------------------------------------

    def add_sample(self, turn_id: int, sample: dict, reward: float, now: float | None = None) -> int:
        """Stores the turn's training sample (state "pending"); the turn becomes "sampled".

        A turn has at most one sample. Re-adding while the old one is still pending replaces it (e.g. the
        turn was re-judged after feedback); once claimed or trained it raises ValueError."""
        now = time.time() if now is None else now
        data = _zjson(sample)
        with self._write() as db:
            self._update_turn(db, turn_id, "status = 'sampled', exclusion_reason = NULL", ())  # KeyError first
            existing = db.execute("SELECT id, state FROM samples WHERE turn_id = ?", (turn_id,)).fetchone()
            if existing is None:
                sample_id = db.execute(
                    "INSERT INTO samples (turn_id, created, state, reward, data) VALUES (?, ?, 'pending', ?, ?)",
                    (turn_id, now, float(reward), data),
                ).lastrowid
            elif existing[1] == "pending":
                sample_id = existing[0]
                db.execute("UPDATE samples SET created = ?, reward = ?, data = ? WHERE id = ?",
                           (now, float(reward), data, sample_id))
            else:
                raise ValueError(f"turn {turn_id} already has a sample in state {existing[1]!r}")
        return sample_id

    def get_sample(self, turn_id: int) -> dict | None:
        """The sample dict of a turn (any state), or None."""
        with self._read() as db:
            row = db.execute("SELECT data FROM samples WHERE turn_id = ?", (turn_id,)).fetchone()
        return None if row is None else _unzjson(row[0])

    def sample_is_pending(self, turn_id: int) -> bool:
        """True while the turn's sample can still be replaced (it is not in a batch or trained)."""
        return self.sample_state(turn_id) == "pending"

    def sample_state(self, turn_id: int) -> str | None:
        """"pending", "in_batch", "trained", or None when the turn has no sample."""
        with self._lock:
            row = self._conn.execute("SELECT state FROM samples WHERE turn_id = ?", (turn_id,)).fetchone()
        return None if row is None else row[0]

    def count_pending_samples(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM samples WHERE state = 'pending'").fetchone()[0]

    def claim_samples(self, batch_id: int, n: int, owner: str | None = None) -> list[dict] | None:
        """All or nothing: the n oldest pending samples become batch `batch_id`, or None if fewer than n
        are pending. Samples beyond n stay pending for the next batch. With `owner`, only while that trainer
        holds the lease (else LeaseLost), checked in the same transaction."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        with self._write() as db:
            self._check_lease(db, owner)
            rows = db.execute(
                "SELECT id, data FROM samples WHERE state = 'pending' ORDER BY created, id LIMIT ?", (n,)
            ).fetchall()
            if len(rows) < n:
                return None
            db.executemany("UPDATE samples SET state = 'in_batch', batch_id = ? WHERE id = ?",
                           [(batch_id, r[0]) for r in rows])
        out = []
        for sample_id, blob in rows:
            sample = _unzjson(blob)
            sample["sample_id"] = sample_id
            out.append(sample)
        return out

    def mark_trained(self, batch_id: int, owner: str | None = None) -> int:
        with self._write() as db:
            self._check_lease(db, owner)
            return db.execute("UPDATE samples SET state = 'trained' WHERE state = 'in_batch' AND batch_id = ?",
                              (batch_id,)).rowcount

    def claim_for_export(self, batch_id: int, owner: str, limit: int | None = None,
                         finished_sessions_only: bool = False) -> list[dict]:
        """Pending samples (all, or the `limit` oldest) become batch `batch_id` for a rollout directory, in session
        order (session, then turn), each with its turn id, session and turn number. `finished_sessions_only`: only
        samples of sessions that ended (finalized), so a session's turns leave the store together. The caller
        writes them out, then calls `mark_exported`; a crash in between leaves them claimed, and the next holder
        of the lease hands them back (`release_untrained`)."""
        where = "s.state = 'pending'"
        if finished_sessions_only:
            where += " AND t.session_id IN (SELECT id FROM sessions WHERE finalized IS NOT NULL)"
        with self._write() as db:
            self._check_lease(db, owner)
            rows = db.execute(
                f"SELECT s.id, s.data, t.id, t.session_id, t.turn_num FROM samples s JOIN turns t ON t.id = s.turn_id "
                f"WHERE {where} ORDER BY t.session_id, t.turn_num, s.id" + (" LIMIT ?" if limit else ""),
                (limit,) if limit else ()).fetchall()
            db.executemany("UPDATE samples SET state = 'in_batch', batch_id = ? WHERE id = ?",
                           [(batch_id, r[0]) for r in rows])
        out = []
        for sample_id, blob, turn_id, session_id, turn_num in rows:
            sample = _unzjson(blob)
            sample["sample_id"] = sample_id
            out.append({"turn_id": turn_id, "session_id": session_id, "turn": turn_num, "sample": sample})
        return out

    def mark_exported(self, batch_id: int, owner: str | None = None) -> int:
        with self._write() as db:
            self._check_lease(db, owner)
            return db.execute("UPDATE samples SET state = 'exported' WHERE state = 'in_batch' AND batch_id = ?",
                              (batch_id,)).rowcount

    def release_untrained(self, from_batch_id: int | None = None) -> int:
        """Claimed but untrained samples (of batches >= from_batch_id; None: of every batch, exports to a rollout
        directory included) go back to the queue. They keep their age, so they are the first to be claimed again."""
        with self._write() as db:
            if from_batch_id is None:
                return db.execute("UPDATE samples SET state = 'pending', batch_id = NULL WHERE state = 'in_batch'"
                                  ).rowcount
            return db.execute(
                "UPDATE samples SET state = 'pending', batch_id = NULL WHERE state = 'in_batch' AND batch_id >= ?",
                (from_batch_id,),
            ).rowcount

    def return_samples(self, turn_ids: list[int]) -> int:
        """Claimed samples of these turns go back to the queue (a rollout that could not use them)."""
        if not turn_ids:
            return 0
        with self._write() as db:
            return db.executemany(
                "UPDATE samples SET state = 'pending', batch_id = NULL WHERE state = 'in_batch' AND turn_id = ?",
                [(int(t),) for t in turn_ids]).rowcount

    # --- the trainer's lease: one trainer claims samples at a time ------------------------------------------

    def acquire_trainer_lease(self, owner: str, host: str, pid: int, ttl: float, holder_is_gone=None,
                              now: float | None = None) -> dict | None:
        """Take the lease for `owner`, or return the live holder (and take nothing). The lease is free when no
        one holds it, its holder stopped renewing more than `ttl` seconds ago, or `holder_is_gone(holder)` says
        the holder process no longer exists (a trainer restarted on the same host need not wait for the TTL)."""
        now = time.time() if now is None else now
        with self._write() as db:
            row = db.execute("SELECT owner, host, pid, acquired, heartbeat FROM trainer_lease WHERE name = 'trainer'"
                             ).fetchone()
            if row is not None and row[0] != owner:
                holder = {"owner": row[0], "host": row[1], "pid": row[2], "acquired": row[3], "heartbeat": row[4]}
                alive = now - holder["heartbeat"] <= ttl and not (holder_is_gone and holder_is_gone(holder))
                if alive:
                    return holder
            db.execute("DELETE FROM trainer_lease WHERE name = 'trainer'")
            db.execute("INSERT INTO trainer_lease (name, owner, host, pid, acquired, heartbeat) "
                       "VALUES ('trainer', ?, ?, ?, ?, ?)", (owner, host, int(pid), now, now))
        return None

    def renew_trainer_lease(self, owner: str, now: float | None = None) -> bool:
        """False when another trainer has taken the lease (this one must stop claiming)."""
        with self._write() as db:
            return db.execute("UPDATE trainer_lease SET heartbeat = ? WHERE name = 'trainer' AND owner = ?",
                              (time.time() if now is None else now, owner)).rowcount == 1

    def release_trainer_lease(self, owner: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM trainer_lease WHERE name = 'trainer' AND owner = ?", (owner,))

    @staticmethod
    def _check_lease(db, owner: str | None) -> None:
        if owner is None:
            return
        row = db.execute("SELECT owner FROM trainer_lease WHERE name = 'trainer'").fetchone()
        if row is None or row[0] != owner:
            raise LeaseLost(f"trainer {owner} no longer holds the store's trainer lease"
                            + (f" (held by {row[0]})" if row else ""))

    # --- feedback ---------------------------------------------------------------------------------

    def add_feedback(self, session_id: str, turn_id: int | None, rating: int | None, text: str | None,
                     now: float | None = None) -> int:
        with self._write() as db:
            return db.execute(
                "INSERT INTO feedback (session_id, turn_id, rating, text, created) VALUES (?, ?, ?, ?, ?)",
                (session_id, turn_id, rating, text, time.time() if now is None else now),
            ).lastrowid

    # --- reporting --------------------------------------------------------------------------------

    def stats(self) -> dict:
        with self._read() as db:
            total, finalized = db.execute(
                "SELECT COUNT(*), COUNT(finalized) FROM sessions").fetchone()
            by_type = dict(db.execute("SELECT turn_type, COUNT(*) FROM turns GROUP BY turn_type").fetchall())
            by_status = dict(db.execute("SELECT status, COUNT(*) FROM turns GROUP BY status").fetchall())
            # main-line turns only: a teacher demonstration carries a judgement but was never a turn to judge
            judged, failures = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(json_extract(judgement, '$.failed') = 1), 0) "
                "FROM turns WHERE judgement IS NOT NULL AND turn_type = 'main'").fetchone()
            by_state = dict(db.execute("SELECT state, COUNT(*) FROM samples GROUP BY state").fetchall())
            trained_batches = db.execute(
                "SELECT COUNT(DISTINCT batch_id) FROM samples WHERE state = 'trained'").fetchone()[0]
            excluded = dict(db.execute(
                "SELECT COALESCE(exclusion_reason, 'unspecified'), COUNT(*) FROM turns "
                "WHERE status = 'excluded' GROUP BY 1").fetchall())
            neg, zero, pos, mean = db.execute(
                "SELECT COALESCE(SUM(reward < 0), 0), COALESCE(SUM(reward = 0), 0), "
                "COALESCE(SUM(reward > 0), 0), AVG(reward) FROM samples").fetchone()
            feedback = db.execute("SELECT COUNT(*) FROM feedback").fetchone()[0]
        return {
            "sessions": {"total": total, "active": total - finalized, "finalized": finalized},
            "turns": {"main": by_type.get("main", 0), "side": by_type.get("side", 0),
                      "demonstration": by_type.get("demonstration", 0), "by_status": by_status},
            "judged": judged,
            "judge_failures": failures,
            "samples": {s: by_state.get(s, 0) for s in ("pending", "in_batch", "trained", "exported")},
            "trained_batches": trained_batches,  # training steps taken on these samples
            "excluded": excluded,
            # rewards are bucketed by sign so fractional rewards (combined methods) still count
            "rewards": {"-1": neg, "0": zero, "1": pos, "mean": mean},
            "feedback": feedback,
            "traces": self.trace_stats(),
        }

    # --- inspection: what was collected, per session ------------------------------------------------

    def session_summaries(self, limit: int = 50, offset: int = 0, active_only: bool = False) -> dict:
        """One page of sessions, most recently seen first, each with the counts of `stats()` for that session.

        Returns {"total": sessions matching, "limit", "offset", "active_only", "sessions": [summary, ...]}.
        SQL aggregates over the page's sessions only (index lookups by session id): no payload is decoded."""
        if limit < 1 or offset < 0:
            raise ValueError(f"limit must be >= 1 and offset >= 0, got limit={limit}, offset={offset}")
        where = "WHERE finalized IS NULL" if active_only else ""
        with self._read() as db:
            total = db.execute(f"SELECT COUNT(*) FROM sessions {where}").fetchone()[0]
            rows = db.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions {where} ORDER BY last_seen DESC, id LIMIT ? OFFSET ?",
                (int(limit), int(offset))).fetchall()
            summaries = self._summarize_sessions(db, rows)
        return {"total": total, "limit": int(limit), "offset": int(offset), "active_only": bool(active_only),
                "sessions": summaries}

    def session_detail(self, session_id: str) -> dict | None:
        """A session's summary plus one row per turn (oldest first) and its feedback; None if unknown.

        Token counts are the lengths of the stored id blobs (decompressed, not decoded); the response
        preview is the first 200 characters of the reply's content."""
        with self._read() as db:
            rows = db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchall()
            if not rows:
                return None
            (summary,) = self._summarize_sessions(db, rows)
            turns = db.execute(
                "SELECT t.id, t.turn_num, t.turn_type, t.turn_reason, t.status, t.exclusion_reason, t.judgement, "
                "s.state, s.reward, t.weight_version, t.created, t.finish_reason, t.next_state_source, "
                "t.response_message, p.prompt_ids, p.response_ids "
                f"FROM {_TURN_FROM} LEFT JOIN samples s ON s.turn_id = t.id WHERE t.session_id = ? ORDER BY t.id",
                (session_id,)).fetchall()
            feedback = db.execute(
                "SELECT f.created, t.turn_num, f.rating, f.text FROM feedback f LEFT JOIN turns t ON t.id = f.turn_id "
                "WHERE f.session_id = ? ORDER BY f.id", (session_id,)).fetchall()
        summary["turn_rows"] = [_turn_detail(row) for row in turns]
        summary["feedback_rows"] = [{"created": created, "turn_num": turn_num, "rating": rating, "text": text}
                                    for created, turn_num, rating, text in feedback]
        return summary

    @staticmethod
    def _summarize_sessions(db: sqlite3.Connection, rows: list[tuple]) -> list[dict]:
        """Per-session counts for the sessions of `rows` (`_SESSION_COLUMNS`), in that order."""
        out: dict[str, dict] = {}
        for sid, source, created, last_seen, finalized, finalize_reason in rows:
            out[sid] = {
                "id": sid, "source": source, "created": created, "last_seen": last_seen,
                "active": finalized is None, "finalized": finalized, "finalize_reason": finalize_reason,
                "turns": {"total": 0, "main": 0, "side": 0, "demonstration": 0, "by_status": {}},
                "judged": 0, "judge_failures": 0,
                "samples": {"pending": 0, "in_batch": 0, "trained": 0, "exported": 0},
                "rewards": {"-1": 0, "0": 0, "1": 0, "mean": None},
                "feedback": 0,
            }
        if not out:
            return []
        ids = _json(list(out))  # one parameter however long the page: json_each expands it for the IN lookup
        # main-line turns only count as judged (a teacher demonstration carries a judgement but was never judged)
        for sid, turn_type, status, n, judged, failed in db.execute(
                "SELECT session_id, turn_type, status, COUNT(*), "
                "COALESCE(SUM(judgement IS NOT NULL AND turn_type = 'main'), 0), "
                "COALESCE(SUM(turn_type = 'main' AND json_extract(judgement, '$.failed') = 1), 0) "
                "FROM turns WHERE session_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2, 3", (ids,)):
            s = out[sid]
            turns = s["turns"]
            turns["total"] += n
            turns[turn_type] = turns.get(turn_type, 0) + n
            turns["by_status"][status] = turns["by_status"].get(status, 0) + n
            s["judged"] += judged
            s["judge_failures"] += failed
        reward_sums: dict[str, float] = {}
        for sid, state, n, neg, zero, pos, total in db.execute(
                "SELECT t.session_id, s.state, COUNT(*), SUM(s.reward < 0), SUM(s.reward = 0), SUM(s.reward > 0), "
                "SUM(s.reward) FROM turns t JOIN samples s ON s.turn_id = t.id "
                "WHERE t.session_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2", (ids,)):
            s = out[sid]
            s["samples"][state] = s["samples"].get(state, 0) + n
            r = s["rewards"]
            r["-1"], r["0"], r["1"] = r["-1"] + neg, r["0"] + zero, r["1"] + pos
            reward_sums[sid] = reward_sums.get(sid, 0.0) + total
        for sid, total in reward_sums.items():
            r = out[sid]["rewards"]
            r["mean"] = total / (r["-1"] + r["0"] + r["1"])
        for sid, n in db.execute("SELECT session_id, COUNT(*) FROM feedback "
                                 "WHERE session_id IN (SELECT value FROM json_each(?)) GROUP BY 1", (ids,)):
            out[sid]["feedback"] = n
        return list(out.values())

    def export_jsonl(self, conversations_path: str | os.PathLike,
                     judgements_path: str | os.PathLike) -> tuple[int, int]:
        """Writes every main-line turn and every judgement as JSONL; returns the two line counts.

        Reads through its own connection, streaming, so a large export never holds the lock that the
        proxy's writes need. Files are written beside their target and renamed into place."""
        conn = _connect(self.path)
        n_conv = n_judge = 0
        conv_tmp, judge_tmp = f"{conversations_path}.tmp", f"{judgements_path}.tmp"
        try:
            conn.execute("BEGIN")  # one snapshot for both files
            rows = conn.execute(
                "SELECT t.session_id, t.turn_num, t.created, p.request, t.response_message, t.next_state, t.status, "
                f"t.weight_version, t.judgement FROM {_TURN_FROM} WHERE t.turn_type = 'main' ORDER BY t.id")
            with open(conv_tmp, "w", encoding="utf-8") as conv, open(judge_tmp, "w", encoding="utf-8") as judge:
                for session_id, turn, created, request, response, next_state, status, version, jdg in rows:
                    response = json.loads(response)
                    conv.write(_json({
                        "session_id": session_id, "turn": turn, "timestamp": _iso(created),
                        "messages": _unzjson(request).get("messages", []), "response": response,
                        "tool_calls": response.get("tool_calls") or None, "next_state": _loads(next_state),
                        "status": status, "weight_version": version,
                    }) + "\n")
                    n_conv += 1
                    if jdg is not None:
                        j = json.loads(jdg)
                        judge.write(_json({
                            "session_id": session_id, "turn": turn, "score": j.get("score"),
                            "votes": j.get("votes", []), "rationale": j.get("rationale", ""),
                            "judge": j.get("judge"), "failed": bool(j.get("failed", False)),
                        }) + "\n")
                        n_judge += 1
            conn.execute("COMMIT")
            os.replace(conv_tmp, conversations_path)
            os.replace(judge_tmp, judgements_path)
        finally:
            conn.close()
            for tmp in (conv_tmp, judge_tmp):
                if os.path.exists(tmp):
                    os.remove(tmp)
        return n_conv, n_judge
