"""The conversation store on PostgreSQL: the store's own test suite, run again against a real server.

Every backend-neutral test of `tests/unit/test_store.py` and `tests/unit/test_store_sessions.py` (exact counts,
claims that are all or nothing, threads and processes that never claim the same sample, exports, session
views) runs here with `store` opened on a fresh database of a private PostgreSQL server
(`tests/helpers/postgres.py`), plus what only a server can show: two hosts' connections writing and claiming at
once, and a URL with a password never printed.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import sys
from pathlib import Path

import pytest

from helpers.postgres import PostgresServer, skip_reason
from slime.conversation import store_backends
from slime.conversation.store import ConversationStore

REASON = skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

# tests about SQLite itself (WAL, its schema file, process RSS): not the store's behaviour
SQLITE_ONLY = {"test_open_sets_wal_and_survives_reopen", "test_newer_schema_is_refused",
               "test_two_thousand_sessions_stay_small", "test_query_plans_use_indexes",
               "test_fast_on_a_large_store"}
_numbers = itertools.count()


def _load(name: str):
    """The unit test module under its own name (as pytest imports it), so that processes it spawns find it too."""
    unit = str(Path(__file__).resolve().parents[1] / "unit")
    if unit not in sys.path:
        sys.path.insert(0, unit)
    return importlib.import_module(name)


for _module in (_load("test_store"), _load("test_store_sessions")):
    for _name, _fn in vars(_module).items():
        if _name.startswith("test_") and callable(_fn) and _name not in SQLITE_ONLY \
                and "store" in inspect.signature(_fn).parameters:
            globals()[f"{_name}__{_module.__name__}"] = _fn


@pytest.fixture(scope="module")
def postgres():
    with PostgresServer() as server:
        yield server


@pytest.fixture()
def store(postgres):
    s = ConversationStore(postgres.create_database(f"store_{next(_numbers)}"))
    yield s
    s.close()


def test_two_connections_interleave_writes_and_claims_like_two_hosts(postgres):
    url = postgres.create_database("two_hosts")
    a, b = ConversationStore(url), ConversationStore(url)
    try:
        turns = [a.add_turn(session_id=f"s{i % 3}", turn_type="main", turn_reason="header", request={"messages": []},
                            response_message={"role": "assistant", "content": str(i)}, prompt_ids=[1], response_ids=[2],
                            response_logprobs=[-0.1], weight_version="0", finish_reason="stop", trace_id=None,
                            fingerprints=[], status="judged") for i in range(9)]
        assert [t.turn_num for t in turns if t.session_id == "s0"] == [1, 2, 3]
        for t in turns:
            b.add_sample(t.id, {"turn": t.id}, 1.0)
        first = a.claim_samples(1, 4)
        second = b.claim_samples(2, 4)
        assert b.claim_samples(3, 4) is None  # one left: all or nothing
        assert not {s["turn"] for s in first} & {s["turn"] for s in second}
        assert a.mark_trained(1) == 4 and b.stats()["samples"] == {"pending": 1, "in_batch": 4, "trained": 4, "exported": 0}
    finally:
        a.close()
        b.close()


def test_a_password_in_the_url_is_never_printed():
    assert store_backends.describe("postgresql://slime:s3cret@db:5432/x") == "postgresql://slime:***@db:5432/x"
    with pytest.raises(ConnectionError) as err:
        ConversationStore("postgresql://slime:s3cret@127.0.0.1:1/x")
    assert "s3cret" not in str(err.value) and "***" in str(err.value)
