"""Rollout directories: judged samples collected from a store into files that a trainer on another host trains
from (the usage guide's `collect_rollouts.py --output-dir` and `train_async.py --rollout-dir`).

    python -m slime.conversation collect --store postgresql://... --output-dir /shared/rollouts [--session-aware]
    python -m slime.conversation train --rollout-dir /shared/rollouts --checkpoint-dir /shared/ckpt --method combine

`collect` holds the store's trainer lease while it runs (it is the consumer of the store's samples: a trainer
attached to the same store is refused meanwhile), claims pending samples, writes them to
`rollout_<time>_<batch>.jsonl` (written beside, fsynced, renamed into place) and marks them `exported`. A crash
between the rename and the mark leaves them claimed; the next consumer hands them back, so a sample may land in
two files: the trainer keys everything by turn id and trains it once.

`RolloutDirDataSource` (`--data-source-path slime.conversation.rollout_dir.RolloutDirDataSource --rollout-dir D`)
hands out batches of samples from the directory's files, oldest file first, and waits for more when it runs out.
What it trained is appended (fsynced) to `D/trained.jsonl` once a batch's step is done; on restart everything not
there is trained (again, if its step was lost with the process). One trainer per directory: it holds an exclusive
`flock` on `D/.trainer.lock` (on one host, or a filesystem whose locks work across hosts).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from pathlib import Path

from slime.conversation.source_state import NextBatchState, sample_from_dict
from slime.rollout import RolloutInterrupted
from slime.utils.types import Sample

log = logging.getLogger("slime.conversation")

FILE_PATTERN = "rollout_*.jsonl"
LEDGER = "trained.jsonl"
LOCK = ".trainer.lock"
POLL_SECONDS = 1.0
PROGRESS_SECONDS = 30.0


def export_batch_id() -> int:
    return -int(time.time() * 1000)  # negative: never one of a trainer's rollout ids


def write_rollout_file(out_dir: str | os.PathLike, batch_id: int, rows: list[dict]) -> Path:
    """One rollout file, written beside and renamed into place (a reader never sees half of it)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"rollout_{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}_{abs(batch_id)}.jsonl"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def collect_once(store, lease, out_dir: str | os.PathLike, limit: int | None = None,
                 session_aware: bool = False) -> tuple[Path | None, int]:
    """Move the store's pending samples into one new file of `out_dir`; (path, count), (None, 0) if none."""
    batch_id = export_batch_id()
    rows = store.claim_for_export(batch_id, lease.owner, limit, finished_sessions_only=session_aware)
    if not rows:
        return None, 0
    path = write_rollout_file(out_dir, batch_id, rows)
    store.mark_exported(batch_id, lease.owner)
    return path, len(rows)


class HttpCollector:
    """`collect --api-endpoint URL`: the same, through the serving host's API (`POST /v1/rollouts/claim`, then
    `/ack` once the file is written, `/release` at the end), for a collector host without access to the store.
    The server holds the store's lease on the collector's behalf; each claim renews it."""

    def __init__(self, url: str, api_key: str | None = None, lease_ttl: float = 60.0, timeout: float = 120.0):
        import socket
        import uuid

        import httpx

        self.url = url.rstrip("/").removesuffix("/v1")
        self.owner = f"collect:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_ttl = lease_ttl
        self.http = httpx.Client(timeout=timeout, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})

    def _post(self, path: str, body: dict) -> dict:
        resp = self.http.post(self.url + path, json={"collector": self.owner, **body})
        if resp.status_code != 200:
            try:
                message = resp.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = resp.text[:500]
            raise RuntimeError(f"{self.url}{path}: HTTP {resp.status_code}: {message}")
        return resp.json()

    def collect_once(self, out_dir, limit: int | None = None, session_aware: bool = False) -> tuple[Path | None, int]:
        claimed = self._post("/v1/rollouts/claim", {"limit": limit, "session_aware": session_aware,
                                                    "lease_ttl": self.lease_ttl})
        if not claimed["rows"]:
            return None, 0
        path = write_rollout_file(out_dir, claimed["batch_id"], claimed["rows"])
        self._post("/v1/rollouts/ack", {"batch_id": claimed["batch_id"]})
        return path, len(claimed["rows"])

    def close(self) -> None:
        try:
            self._post("/v1/rollouts/release", {})
        finally:
            self.http.close()


def read_rollout_file(path: Path) -> list[dict]:
    """The sample rows of one rollout file."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
                rows.append({"turn_id": int(row["turn_id"]), "sample": row["sample"],
                             "session_id": row.get("session_id"), "file": path.name})
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a rollout row ({exc})") from None
    return rows


def read_rollout_files(folder: Path, cache: dict[str, list[dict]] | None = None) -> list[dict]:
    """Every sample row of the folder's rollout files, oldest file first (names sort by time). A file is written
    beside and renamed into place, so it never changes once listed: with `cache`, each is parsed once."""
    rows = []
    for path in sorted(folder.glob(FILE_PATTERN)):
        if cache is None:
            rows.extend(read_rollout_file(path))
            continue
        if path.name not in cache:
            cache[path.name] = read_rollout_file(path)
        rows.extend(cache[path.name])
    return rows


class RolloutDirDataSource(NextBatchState):
    """Batches from a rollout directory, each sample trained once (`trained.jsonl`), new files picked up live."""

    live_traffic = True  # publish after every step: the engine serving users should get each update
    STATE_NAME = "rollout_dir_state"

    def __init__(self, args):
        self.args = args
        if not getattr(args, "rollout_dir", None):
            raise ValueError("RolloutDirDataSource needs --rollout-dir")
        self.folder = Path(args.rollout_dir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.folder / LOCK, "a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise RuntimeError(f"another trainer is training from {self.folder} (it holds {self.folder / LOCK}); "
                               "two would train the same samples") from None
        self.trained: set[int] = set()
        ledger = self.folder / LEDGER
        if ledger.exists():
            for line in ledger.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    try:
                        self.trained.update(json.loads(line)["turn_ids"])
                    except (ValueError, KeyError):  # a torn last line from a crash: that batch trains again
                        log.warning("ignoring an unreadable line of %s", ledger)
        self.in_flight: dict[int, list[int]] = {}
        self._parsed: dict[str, list[dict]] = {}  # rollout file name -> its rows (files never change once there)
        self.next_batch = 0
        log.info("training from %s: %d sample(s) already trained there", self.folder, len(self.trained))

    def _available(self) -> list[dict]:
        taken = self.trained | {t for ids in self.in_flight.values() for t in ids}
        out, seen = [], set()
        for row in read_rollout_files(self.folder, self._parsed):
            if row["turn_id"] not in taken and row["turn_id"] not in seen:
                seen.add(row["turn_id"])
                out.append(row)
        return out

    def claim(self, rollout_id: int, n: int) -> list[Sample]:
        started = last_report = time.monotonic()
        stop = getattr(self.args, "stop_flag", None)
        while True:
            rows = self._available()
            if len(rows) >= n:
                chosen = rows[:n]
                self.in_flight[rollout_id] = [r["turn_id"] for r in chosen]
                self.next_batch = rollout_id + 1
                return [sample_from_dict(r["sample"]) for r in chosen]
            if stop is not None and stop.requested:
                raise RolloutInterrupted(f"stopped while waiting for rollout files for rollout {rollout_id}")
            now = time.monotonic()
            if now - last_report >= PROGRESS_SECONDS:
                log.info("rollout %d: %d/%d samples in %s, waiting for more files (%.0f s)", rollout_id, len(rows), n,
                         self.folder, now - started)
                last_report = now
            time.sleep(POLL_SECONDS)

    def mark_trained(self, rollout_id: int) -> None:
        ids = self.in_flight.pop(rollout_id, [])
        if not ids:
            return
        with open(self.folder / LEDGER, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"rollout_id": rollout_id, "turn_ids": ids, "time": time.time()}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.trained.update(ids)

    def metrics(self) -> dict:
        return {"rollout/pending_samples": len(self._available()), "rollout/trained_from_dir": len(self.trained)}

    def get_samples(self, num_groups: int) -> list[list[Sample]]:
        return [[s] for s in self.claim(self.next_batch, num_groups)]

    def add_samples(self, groups: list[list[Sample]]) -> None:
        returned = {s.index for group in groups for s in group}
        for rollout_id in list(self.in_flight):
            self.in_flight[rollout_id] = [t for t in self.in_flight[rollout_id] if t not in returned]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "rollout_dir": str(self.folder)}

    def close(self) -> None:
        if not self._lock.closed:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
