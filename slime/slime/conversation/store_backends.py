"""Where the conversation store lives: a SQLite file (one host) or a PostgreSQL database (several hosts).

`ConversationStore` writes its SQL once, in SQLite's dialect, against a connection with `execute` /
`executemany` and SQLite's cursor conventions (`lastrowid`, `rowcount`). For PostgreSQL, `PostgresConnection`
offers the same surface over psycopg and adapts the few things that differ:

- placeholders (`?` -> `%s`), `json_each(?)` (-> `jsonb_array_elements_text`), `INSERT` into a table with an id
  (-> `RETURNING id`, read back as `lastrowid`), and the schema's types (`BIGSERIAL`, `BYTEA`, `DOUBLE PRECISION`);
- `json_extract(doc, '$.key')` and `SUM(<condition>)`, which the store uses in its counts, exist as SQL functions
  created with the schema (numbers and booleans as SQLite returns them; a condition counts 1 when true);
- transactions keep SQLite's semantics: a write transaction (`BEGIN IMMEDIATE`) takes one database-wide advisory
  lock first, so writers are serialised exactly as on SQLite and a claim (select + update) is atomic across every
  host attached; a read transaction (`BEGIN`) sees one snapshot (REPEATABLE READ).

    ConversationStore("runs/x/conversations.db")                        # SQLite file
    ConversationStore("postgresql://slime:pw@db-host:5432/slime")        # PostgreSQL (`pip install psycopg[binary]`)
"""

from __future__ import annotations

import re
import sqlite3

# one database-wide lock key for write transactions (pg_advisory_xact_lock takes a bigint): "slimeDB" in ASCII
WRITE_LOCK_KEY = 0x736C696D654442
TABLES_WITH_IDS = ("turns", "samples", "feedback")

POSTGRES_FUNCTIONS = (
    # json_extract(doc, '$.a.b'): a JSON number as a number, a boolean as 1 / 0, anything else NULL
    """CREATE OR REPLACE FUNCTION json_extract(doc text, path text) RETURNS double precision
       LANGUAGE sql IMMUTABLE AS $$
         SELECT CASE jsonb_typeof(v)
                  WHEN 'number' THEN (v #>> '{}')::double precision
                  WHEN 'boolean' THEN CASE WHEN (v #>> '{}')::boolean THEN 1 ELSE 0 END
                END
         FROM (SELECT (doc::jsonb) #> string_to_array(substr(path, 3), '.') AS v) AS picked
       $$""",
    # SUM(<condition>): how many rows the condition holds for (SQLite's booleans are integers)
    """CREATE OR REPLACE FUNCTION slime_count_true(total bigint, cond boolean) RETURNS bigint
       LANGUAGE sql IMMUTABLE AS $$ SELECT total + CASE WHEN cond THEN 1 ELSE 0 END $$""",
    """CREATE OR REPLACE AGGREGATE sum(boolean) (SFUNC = slime_count_true, STYPE = bigint, INITCOND = '0')""",
)


def is_postgres(location) -> bool:
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def describe(location) -> str:
    """The location without a password, for logs and errors."""
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", str(location))


def connect(location):
    """A connection to the store's database: sqlite3 for a path, `PostgresConnection` for a postgresql:// URL."""
    if is_postgres(location):
        return PostgresConnection(location)
    # isolation_level=None: the sqlite3 module opens no implicit transactions; we issue BEGIN ourselves
    conn = sqlite3.connect(location, timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")  # before journal_mode, which may have to wait for a lock
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: survives process crashes, fsyncs rarely
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def schema_statements(schema: str, location) -> list[str]:
    """The store's schema (SQLite's DDL) as statements for this location's database."""
    statements = [s for s in (part.strip() for part in schema.split(";")) if s]
    if not is_postgres(location):
        return statements
    out = []
    for statement in statements:
        statement = re.sub(r"--[^\n]*", "", statement)  # comments may hold words the rewrites below would touch
        statement = statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        statement = re.sub(r"\bBLOB\b", "BYTEA", statement)
        statement = re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement)
        statement = re.sub(r"\bINTEGER\b", "BIGINT", statement)
        out.append(statement)
    return list(POSTGRES_FUNCTIONS) + out


_INSERT_WITH_ID = re.compile(r"^\s*INSERT\s+INTO\s+(" + "|".join(TABLES_WITH_IDS) + r")\b", re.IGNORECASE)


def translate(sql: str) -> tuple[str, bool]:
    """SQLite's SQL as the store writes it -> (PostgreSQL's, whether it returns the new row's id)."""
    sql = sql.replace("%", "%%")  # psycopg reads % as a placeholder
    sql = re.sub(r"json_each\(\?\)", "jsonb_array_elements_text(?::jsonb)", sql)
    sql = sql.replace("?", "%s")
    returning = bool(_INSERT_WITH_ID.match(sql)) and "RETURNING" not in sql.upper()
    if returning:
        sql += " RETURNING id"
    return sql, returning


class _Cursor:
    """What the store reads from a statement: rows, `rowcount`, and `lastrowid` after an INSERT."""

    def __init__(self, cursor, returning: bool):
        self._cursor = cursor
        self.lastrowid = cursor.fetchone()[0] if returning else None
        self.rowcount = cursor.rowcount

    def fetchone(self):
        return self._cursor.fetchone() if self._cursor.description else None

    def fetchall(self):
        return self._cursor.fetchall() if self._cursor.description else []

    def __iter__(self):
        return iter(self.fetchall())


class PostgresConnection:
    """sqlite3.Connection's surface, as the store uses it, over one psycopg connection (autocommit; the store
    issues BEGIN / COMMIT / ROLLBACK itself)."""

    def __init__(self, url: str):
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise RuntimeError("a postgresql:// store needs psycopg: pip install 'psycopg[binary]'") from exc
        self.url = url
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=30)
        except psycopg.OperationalError as exc:
            raise ConnectionError(f"cannot connect to the store {describe(url)}: {exc}".strip()) from None

    def execute(self, sql: str, params=()):
        if sql == "BEGIN IMMEDIATE":  # a write transaction: serialised database-wide, as on SQLite
            self._conn.execute("BEGIN")
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))
            return None
        if sql == "BEGIN":  # a read transaction: one snapshot for all its statements
            self._conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            return None
        if sql in ("COMMIT", "ROLLBACK"):
            self._conn.execute(sql)
            return None
        query, returning = translate(sql)
        return _Cursor(self._conn.execute(query, tuple(params)), returning)

    def executemany(self, sql: str, seq_of_params):
        query, _ = translate(sql)
        cursor = self._conn.cursor()
        rows = [tuple(p) for p in seq_of_params]
        total = 0
        for params in rows:  # one by one: rowcount must be the total, as sqlite3 reports it
            cursor.execute(query, params)
            total += max(cursor.rowcount, 0)

        class _Done:
            rowcount = total

        return _Done()

    def close(self) -> None:
        self._conn.close()
