"""A throwaway PostgreSQL server for the store tests (team mode), started from Debian's binaries.

One server per test session, on a free loopback port with its socket in a temp dir, trust auth,
durability off (fsync): it holds nothing worth keeping. Each test gets its own database. When the
binaries are missing or the server cannot start, `PostgresUnavailable` says why and the tests that
need it fail (tests/required_tools.py); set RAYPD_TEST_DATABASE_URL to use a server of your own
instead (its databases are created and dropped the same way, so give it a user allowed to CREATE
DATABASE).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import NoReturn, Optional

from tests.required_tools import tool_missing

SERVER_USER = "postgres"


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise PostgresUnavailable("pg_ctl is not installed: not in /usr/lib/postgresql/*/bin, not on PATH")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="raypd-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log = self.root / "server.log"
        self.user = SERVER_USER if os.geteuid() == 0 else None  # initdb refuses to run as root
        self.running = False

    def _run(self, *args: str, timeout: float = 120) -> None:
        command = list(args)
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PostgresUnavailable(f"{Path(args[0]).name} could not run: {exc}") from None
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip()[-800:]
            raise PostgresUnavailable(f"{Path(args[0]).name} failed: {tail}")

    def start(self) -> "PostgresServer":
        self.socket_dir.mkdir()
        self.log.touch()
        if self.user is not None:
            shutil.chown(self.root, self.user)
            shutil.chown(self.socket_dir, self.user)
            shutil.chown(self.log, self.user)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "--no-sync", "-E", "UTF8")
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server (again, after `halt`) on the same data directory and port."""
        options = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.socket_dir} "
                   "-c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log),
                  "-w", "-t", "60", "start")
        self.running = True

    def halt(self) -> None:
        """Stop the server, keeping its data: "fast" cuts every open connection, as a database restart or
        failover does (not "immediate": with this server's synchronous_commit=off, recent commits
        would be lost, which a real server with its default durability would keep)."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        self.running = False

    def stop(self) -> None:
        if self.running:
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            finally:
                self.running = False
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class Databases:
    """Makes and drops one database per test on a server reached by `admin_url`."""

    def __init__(self, admin_url: str):
        import psycopg  # noqa: F401 - checked here so a missing driver fails saying so (unavailable)

        self.admin_url = admin_url

    def _admin(self, sql: str) -> None:
        import psycopg

        url = self.admin_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)

    def create(self) -> str:
        name = f"raypd_test_{uuid.uuid4().hex[:12]}"
        self._admin(f'CREATE DATABASE "{name}"')
        base, _, _ = self.admin_url.rpartition("/")
        return f"{base}/{name}"

    def drop(self, url: str) -> None:
        name = url.rpartition("/")[2]
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def unavailable(exc: Exception) -> NoReturn:
    """Fail the test that needs PostgreSQL, saying why none is there and how to get one."""
    tool_missing("a PostgreSQL server", f"none can start ({exc})",
                 "run scripts/ensure-postgresql (make test does; as root it installs Debian's postgresql "
                 "package), or set RAYPD_TEST_DATABASE_URL to a server of your own")


def start() -> tuple[Optional[PostgresServer], Databases]:
    """The server for this session (None when RAYPD_TEST_DATABASE_URL names one) and its databases."""
    given = os.environ.get("RAYPD_TEST_DATABASE_URL")
    if given:
        return None, Databases(given)
    server = PostgresServer()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server, Databases(server.admin_url)
