"""Where the store lives and what it looks like: database URLs, engines, tables, migrations.

Two dialects, one schema. SQLite (WAL) under RAYPD_HOME is the embedded default: one server, one
file, nothing to run. With RAYPD_DATABASE_URL=postgresql://... several app servers share one
PostgreSQL database (team mode): deployments, jobs and the per-deployment lock are then common to
all of them. The schema is owned by Alembic (webui/migrations), applied at start-up, so a store
written by an older raypd is upgraded in place instead of being refused or silently misread.

A database URL may carry a password: only the URL with its password hidden is ever put in a
message (and webui.redact masks a URL's `user:password@` in any text that quotes one).
"""

from __future__ import annotations

import errno
import logging
import sqlite3
from pathlib import Path
from typing import Any, Optional, Union

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    create_engine,
    event,
    false,
    text,
)
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SUPPORTED_SCHEMES = ("sqlite", "postgresql")

try:  # psycopg is what team mode needs; an embedded-only install may lack it
    import psycopg
    _PSYCOPG_ERRORS: tuple[type[BaseException], ...] = (psycopg.Error,)
except ImportError:  # pragma: no cover - requirements.txt pins it
    _PSYCOPG_ERRORS = ()

# What a failing store raises, whatever the dialect: the driver's errors (wrapped by SQLAlchemy or
# raw), an exhausted pool, and the OS's (a full disk, a vanished file).
STORE_ERRORS: tuple[type[BaseException], ...] = (
    DBAPIError, PoolTimeout, sqlite3.Error, *_PSYCOPG_ERRORS, OSError,
)


# The OS's ways of saying "no space": a full disk, a full quota.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_DISK_FULL_WORDS = ("disk is full", "no space left on device", "disk full", "quota exceeded")


def is_disk_full(exc: BaseException) -> bool:
    """Whether a store error means the disk (or the quota) is full: the file is fine, and the
    same call works once space is freed. SQLite says "database or disk is full" (SQLITE_FULL);
    PostgreSQL "could not extend file ...: No space left on device" (SQLSTATE 53100, disk_full);
    the OS ENOSPC or EDQUOT. Looks through SQLAlchemy's wrapper and the exception's causes."""
    seen: set[int] = set()
    current: Optional[BaseException] = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        inner = current.orig if isinstance(current, DBAPIError) and current.orig is not None else current
        if isinstance(inner, OSError) and inner.errno in NO_SPACE_ERRNOS:
            return True
        if getattr(inner, "sqlstate", None) == "53100":
            return True
        words = str(inner).lower()
        if any(word in words for word in _DISK_FULL_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


class DatabaseUrlError(ValueError):
    """RAYPD_DATABASE_URL cannot work; the message never contains the password."""


def error_text(exc: BaseException) -> str:
    """The driver's own words for a store error, without SQLAlchemy's SQL echo and links."""
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    words = str(inner).strip()
    return words.splitlines()[0] if words else type(inner).__name__


def parse_url(value: Union[str, Path, URL]) -> URL:
    """A store location as a SQLAlchemy URL: a path is a SQLite file; postgresql:// uses psycopg 3."""
    if isinstance(value, Path):
        return URL.create("sqlite", database=str(value))
    if isinstance(value, URL):
        url = value
    else:
        try:
            url = make_url(value)
        except ArgumentError:
            raise DatabaseUrlError(
                "RAYPD_DATABASE_URL is not a database URL (expected postgresql://user:password@host:port/db)"
            ) from None
    backend = url.get_backend_name()
    if backend == "postgres":  # the old spelling some hosting providers still hand out
        url = url.set(drivername="postgresql")
        backend = "postgresql"
    if backend not in SUPPORTED_SCHEMES:
        raise DatabaseUrlError(
            f"RAYPD_DATABASE_URL {safe_url(url)}: only postgresql:// (team mode) or sqlite:// is supported"
        )
    if backend == "postgresql" and "+" not in url.drivername:  # psycopg 3, whatever SQLAlchemy's default
        url = url.set(drivername="postgresql+psycopg")
    return url


def safe_url(url: Union[str, URL]) -> str:
    """The URL as it may be shown: password hidden."""
    if isinstance(url, str):
        try:
            url = make_url(url)
        except ArgumentError:
            return "(unparseable URL)"
    if "password" in url.query:  # libpq also takes it as ?password=...
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)


def is_shared(url: URL) -> bool:
    """True when other servers may use the same store (PostgreSQL): team mode."""
    return url.get_backend_name() == "postgresql"


def make_engine(url: URL, pool_size: int = 8) -> Engine:
    if url.get_backend_name() == "sqlite":
        engine = create_engine(
            url, pool_size=pool_size, max_overflow=pool_size, pool_timeout=30, hide_parameters=True,
            connect_args={"timeout": 10, "check_same_thread": False},
        )
        _sqlite_transactions(engine)
        return engine
    return create_engine(
        url, pool_size=pool_size, max_overflow=pool_size, pool_timeout=30, pool_pre_ping=True,
        hide_parameters=True, connect_args={"connect_timeout": 10, "application_name": "raypd"},
    )


def _sqlite_transactions(engine: Engine) -> None:
    """Let SQLAlchemy, not the sqlite3 module, say when transactions begin (SQLAlchemy's documented
    recipe), and begin them IMMEDIATE: a transaction that reads, then writes takes the write lock
    first, so two writers queue on the busy timeout instead of one failing at once."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN from the driver
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # Reads (the store's `raypd_read` engine) begin DEFERRED: in WAL they never wait for a writer.
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("raypd_read") else "BEGIN IMMEDIATE")


# ---- the current schema (what the newest migration leaves); queries are built from it ----

metadata = MetaData()

deployments = Table(
    "deployments", metadata,
    Column("name", Text, primary_key=True),
    Column("engine", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("config", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("outputs", Text),
    Column("resources", Text),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("last_operation", Text),
    Column("last_operation_at", Float),
    Column("last_result", Text),
    Column("last_job", Text),
)

jobs = Table(
    "jobs", metadata,
    Column("id", Text, primary_key=True),
    Column("deployment", Text, nullable=False),
    Column("operation", Text, nullable=False),
    Column("engine", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("previous_status", Text),
    Column("done", Integer, nullable=False, server_default=text("0")),
    Column("total", Integer, nullable=False, server_default=text("0")),
    Column("error", Text),
    Column("hint", Text),
    Column("actor", Text),
    Column("summary", Text),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float),
    Column("finished_at", Float),
    Column("owner", Text),  # the server (instances.id) running it; version 2
    Column("cancel_requested_at", Float),  # a cancel asked on any server; the owner acts on it; version 2
)
# webui.status.ACTIVE, spelled out: the index below is DDL that migration 0001 froze (a test keeps
# the two equal; changing the active statuses needs a migration that rebuilds the index).
ACTIVE_WORDS = ("queued", "running")
Index("jobs_by_deployment", jobs.c.deployment, jobs.c.created_at)
Index("jobs_by_status", jobs.c.status)
# The per-deployment lock lives in the store, not in a process: any number of servers on one
# store still cannot run two jobs on one deployment.
Index(
    "one_active_job_per_deployment", jobs.c.deployment, unique=True,
    sqlite_where=jobs.c.status.in_(ACTIVE_WORDS), postgresql_where=jobs.c.status.in_(ACTIVE_WORDS),
)

events = Table(
    "events", metadata,
    Column("job", Text, primary_key=True),
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("time", Float, nullable=False),
    Column("data", Text, nullable=False),
)

checks = Table(
    "checks", metadata,
    Column("deployment", Text, primary_key=True),
    Column("kind", Text, primary_key=True),
    Column("job", Text),
    Column("time", Float, nullable=False),
    Column("report", Text, nullable=False),
)

# What the last successful up deployed (offline: planned), kept apart from the stack's current,
# maybe pending, config in `deployments` (issue 14; the columns after `time` are version 4).
deployed_configs = Table(
    "deployed_configs", metadata,
    Column("deployment", Text, primary_key=True),
    Column("config", Text, nullable=False),
    Column("time", Float, nullable=False),
    Column("summary", Text),  # webui/summary.py of that config, for the list
    Column("plan", Text),  # offline engine: the plan that up made (Contract 2 JSON)
    Column("job", Text),  # the up job
    Column("token_replaced", Boolean, nullable=False, server_default=false()),  # a new HF token since
)

sessions = Table(
    "sessions", metadata,
    Column("id", Text, primary_key=True),
    Column("created", Float, nullable=False),
    Column("ended", Float),
)

audit = Table(
    "audit", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", Float, nullable=False),
    Column("actor", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("result", Text, nullable=False),
    Column("detail", Text),
    sqlite_autoincrement=True,
)

# Each stack's Pulumi settings file (Pulumi.<stack>.yaml) as the engine wrote it: its config, the
# secrets encrypted by the secrets provider (never in clear), and the provider's own state
# (`encryptionsalt`, or `secretsprovider` + `encryptedkey`). A DIY Pulumi backend keeps none of this
# (the CLI reads it from the work dir), so it lives here, where every server sharing the store finds
# it; each job writes it into a fresh work dir and reads it back (version 5).
stack_files = Table(
    "stack_files", metadata,
    Column("stack", Text, primary_key=True),
    Column("text", Text, nullable=False),
    Column("updated_at", Float, nullable=False),
)

# Finished benchmarks (version 3): settings and summary as JSON, the records as gzip JSON lines.
benchmark_runs = Table(
    "benchmark_runs", metadata,
    Column("id", Text, primary_key=True),
    Column("deployment", Text, nullable=False),
    Column("label", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("actor", Text),
    Column("settings", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("records", LargeBinary, nullable=False),
)
Index("benchmark_runs_by_deployment", benchmark_runs.c.deployment, benchmark_runs.c.created_at)

# Finished resilience checks (version 6): what was asked and the Contract 8 report, as JSON.
resilience_runs = Table(
    "resilience_runs", metadata,
    Column("id", Text, primary_key=True),
    Column("deployment", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("actor", Text),
    Column("settings", Text, nullable=False),
    Column("report", Text, nullable=False),
)
Index("resilience_runs_by_deployment", resilience_runs.c.deployment, resilience_runs.c.created_at)

# Servers using this store and when each was last seen (team mode: whose jobs are orphaned).
instances = Table(
    "instances", metadata,
    Column("id", Text, primary_key=True),
    Column("host", Text, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("seen_at", Float, nullable=False),
)


# The conformance matrix of a deployment (version 6): each run's Contract 7 report, the deployment
# it was compared with (`reference`, a deployment of this app, or NULL), and who asked. The page and
# the API read the newest; no foreign key to deployments, as with benchmark runs.
conformance_runs = Table(
    "conformance_runs", metadata,
    Column("id", Text, primary_key=True),  # the job that made it
    Column("deployment", Text, nullable=False),
    Column("reference", Text),
    Column("created_at", Float, nullable=False),
    Column("actor", Text),
    Column("report", Text, nullable=False),
)
Index("conformance_runs_by_deployment", conformance_runs.c.deployment, conformance_runs.c.created_at)


# ---- migrations ----

def alembic_config(connection: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


class NewerSchema(Exception):
    """The store was written by a newer raypd: this one cannot know what its schema means."""


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the store's schema to `revision` (the newest by default), in one transaction.

    On PostgreSQL an advisory lock makes servers starting together take turns; on SQLite the
    IMMEDIATE transaction does the same. A store at a revision this code does not know (written
    by a newer raypd) is refused rather than touched.
    """
    from alembic import command
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(7231007)"))  # "raypd" schema lock
        config = alembic_config(connection)
        known = {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}
        current = MigrationContext.configure(connection).get_current_revision()
        if current is not None and current not in known:
            raise NewerSchema(
                f"its schema is at version {current}, written by a newer raypd than this one "
                f"(which knows up to {max(known)}); run that newer raypd, or restore a backup of the store"
            )
        command.upgrade(config, revision)
        after = MigrationContext.configure(connection).get_current_revision()
        if current is None:
            logger.info("job store schema set up at version %s", after)
        elif after != current:
            logger.info("job store schema upgraded from version %s to %s", current, after)


def current_revision(engine: Engine) -> Any:
    from alembic.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
