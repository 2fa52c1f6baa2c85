"""A private PostgreSQL server for tests: its own data folder, a free loopback port, stopped by PID.

`scripts/setup_postgres.sh` installs Debian's `postgresql` when its binaries are missing (CI runs it through
`scripts/run_tests.sh`). As root, the server runs as the `postgres` user the package creates (initdb refuses
root). Trust authentication on 127.0.0.1 only; fsync off (a test server, thrown away after the run).

    with PostgresServer() as pg:
        url = pg.create_database("store_a")     # postgresql://postgres@127.0.0.1:PORT/store_a
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from slime.engine.launch import free_port


def postgres_bin_dir() -> str | None:
    """The folder holding initdb and postgres (PATH first, then Debian's /usr/lib/postgresql/<version>/bin)."""
    found = shutil.which("initdb")
    if found and os.path.exists(os.path.join(os.path.dirname(os.path.realpath(found)), "postgres")):
        return os.path.dirname(os.path.realpath(found))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    return os.path.dirname(versions[0]) if versions else None


def skip_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if postgres_bin_dir() is None:
        return "PostgreSQL binaries not found: run `bash scripts/setup_postgres.sh` (Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
    return None


class PostgresServer:
    def __init__(self):
        self.bin = postgres_bin_dir()
        if self.bin is None:
            raise RuntimeError(skip_reason() or "no PostgreSQL")
        self.root = tempfile.mkdtemp(prefix="slime-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = os.path.join(self.root, "postgres.log")
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def start(self) -> "PostgresServer":
        subprocess.run([*self._as_user, os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
                        "-A", "trust", "--no-sync", "-E", "UTF8"], check=True, capture_output=True, timeout=180)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [*self._as_user, os.path.join(self.bin, "postgres"), "-D", self.data, "-p", str(self.port),
             "-k", self.root, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {self.read_log()[-2000:]}")
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"postgres did not accept connections: {self.read_log()[-2000:]}") from None
                time.sleep(0.2)

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def read_log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # runuser forwards SIGINT to postgres: "fast shutdown"
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
