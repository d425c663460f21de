"""The store's connection: opening and migrating the database, one read or one write transaction
at a time, and the few writes that ride in another table's transaction (an event, an audit line).

Every table's rows (webui/store/*.py) are a mixin over `StoreBase`; `webui.store.Store` is all of
them. One engine serves SQLite and PostgreSQL (SQLAlchemy Core over `webui.db`'s tables).
"""

from __future__ import annotations

import json
import shlex
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from sqlalchemy import func, insert, literal, select
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine, RowMapping

from webui import db
from webui.db import STORE_ERRORS, DatabaseUrlError, error_text, safe_url
from webui.redact import redact, redact_value
from webui.status import ACTIVE, JobStatus


class StoreError(Exception):
    """The store cannot be opened; the message says which store and what to do (no password)."""


class NameTaken(Exception):
    """A deployment with this name already exists."""


class JobActive(Exception):
    """A job is already queued or running on this deployment (`job_id`, when it could be read)."""

    def __init__(self, job_id: Optional[str]):
        super().__init__(job_id or "")
        self.job_id = job_id


@dataclass(frozen=True)
class AuditLine:
    """One audit entry, written in the same transaction as the job change it records."""

    actor: str
    action: str
    target: str
    result: str
    detail: Optional[str] = None


def json_or(text: Optional[str], default: Any = None) -> Any:
    """A JSON column's value; NULL (a column older rows lack) reads as `default`."""
    return default if text is None else json.loads(text)


def compact_json(value: Any) -> str:
    """Without spaces: resource_durations finds resource events by their '"kind":"resource"' text."""
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def status_words(statuses: tuple[Any, ...]) -> list[str]:
    """Statuses as the column holds them, for an IN (...)."""
    return [JobStatus(status).value for status in statuses]


class StoreBase:
    """The connection to the store and the writes other tables' rows share a transaction with.

    `location`: a SQLite file path, or a database URL (sqlite:///..., postgresql://...).
    """

    def __init__(self, location: Union[Path, str, URL], pool_size: int = 8):
        self.path: Optional[Path] = None
        self.instance_id = uuid.uuid4().hex[:16]  # this server, as the jobs it owns name it
        # Stack settings files an engine writes during a change, per thread (DeploymentRows.staged_stack_file).
        self._staging = threading.local()
        try:
            self.url = db.parse_url(location)
        except DatabaseUrlError as exc:
            raise StoreError(str(exc)) from None
        self.shared = db.is_shared(self.url)
        if not self.shared:
            self.path = Path(self.url.database or "")
        try:
            self._engine: Engine = db.make_engine(self.url, pool_size=pool_size)
        except ImportError as exc:  # e.g. psycopg missing from a hand-made environment
            raise StoreError(f"cannot open the job store {self.location}: {exc}") from None
        self._reader = self._engine.execution_options(raypd_read=True)
        try:
            db.upgrade(self._engine)
        except db.NewerSchema as exc:
            self.close()
            raise StoreError(f"cannot open the job store {self.location}: {exc}") from None
        except STORE_ERRORS as exc:
            self.close()
            raise StoreError(self._open_failure(exc)) from None

    def _open_failure(self, exc: BaseException) -> str:
        reason = redact(error_text(exc))
        if self.shared:
            return (
                f"cannot open the job store {safe_url(self.url)}: {reason}. Check RAYPD_DATABASE_URL "
                "(host, port, database, user and password) and that the database server is reachable"
            )
        path = str(self.path)
        if db.is_disk_full(exc):
            # Not damage: the file is as it was, and it holds every stack's settings (the secrets'
            # encryption salt among them). Moving it aside, as for a damaged file, would lose them.
            return (f"cannot open the job store {path}: the disk is full ({reason}). Free space on the "
                    f"disk that holds {shlex.quote(str(self.path.parent) if self.path else path)} and "
                    "start again; the store file is not damaged: keep it as it is")
        return (
            f"cannot open the job store {path}: {reason}. If the file is damaged, move it "
            f"aside (mv {shlex.quote(path)} {shlex.quote(path + '.broken')}) "
            "and start again: deployments are listed again from a new store (the Pulumi state "
            "is not in this file), but each stack's settings (its config and its secrets' "
            "encryption salt) were: keep the .broken file, they can be recovered from it "
            f"(sqlite3 {shlex.quote(path + '.broken')} .recover)"
        )

    @property
    def location(self) -> str:
        """Where the store is, fit for a log line (a URL's password hidden)."""
        return str(self.path) if self.path is not None else safe_url(self.url)

    @property
    def schema_version(self) -> Optional[str]:
        """The Alembic revision the store is at ("0002", ...)."""
        return db.current_revision(self._engine)

    # ---- connections ----

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._reader.connect() as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._engine.begin() as conn:
            yield conn

    def ping(self) -> None:
        """One round trip to the database; raises what the driver raises when it is not there."""
        with self._read() as conn:
            conn.execute(select(literal(1))).scalar_one()

    def close(self) -> None:
        self._engine.dispose()

    def _upsert(self, conn: Connection, table: Any, values: dict[str, Any], keys: list[str]) -> None:
        dialect = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
        statement = dialect.insert(table).values(**values)
        changes = {name: statement.excluded[name] for name in values if name not in keys}
        conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes))

    def _clock(self) -> Any:
        """"Now" for liveness: the database server's clock in team mode (servers' own clocks may
        disagree by more than the staleness limit), this machine's for SQLite (one machine)."""
        if self.shared:
            return func.extract("epoch", func.clock_timestamp())
        return time.time()


    # ---- the per-deployment lock, as a change of settings and a job's start share it ----

    def _hold_deployment(self, conn: Connection, deployment: str) -> Optional[RowMapping]:
        """The deployment's row, locked until `conn`'s transaction ends: PostgreSQL's SELECT ...
        FOR UPDATE (SQLite ignores it: its IMMEDIATE transaction already holds the database's write
        lock). A job's insert (JobRows.create_job) and a change of the settings (set_config) take it
        first, so on any number of servers one waits for the other, and the second sees what the
        first committed (issue 29 §3)."""
        return conn.execute(
            select(db.deployments).where(db.deployments.c.name == deployment).with_for_update()
        ).mappings().first()

    def _active_job_in(self, conn: Connection, deployment: str) -> Optional[str]:
        """The deployment's queued or running job, as `conn` sees it."""
        j = db.jobs.c
        return conn.execute(
            select(j.id).where(j.deployment == deployment, j.status.in_(status_words(ACTIVE)))
            .order_by(j.created_at).limit(1)
        ).scalar()

    def _append_event(self, conn: Connection, job_id: str, record: dict[str, Any], now: float) -> int:
        # Lock the job's row first (PostgreSQL; SQLite's IMMEDIATE transaction already holds the
        # write lock), so two writers cannot pick one seq.
        conn.execute(select(db.jobs.c.id).where(db.jobs.c.id == job_id).with_for_update())
        seq = conn.execute(
            select(func.coalesce(func.max(db.events.c.seq), 0) + 1).where(db.events.c.job == job_id)
        ).scalar_one()
        conn.execute(insert(db.events).values(job=job_id, seq=seq, time=now,
                                              data=compact_json(redact_value(record))))
        return int(seq)


    def _append_audit(self, conn: Connection, line: AuditLine, now: float) -> None:
        conn.execute(insert(db.audit).values(
            time=now, actor=line.actor, action=line.action, target=line.target, result=line.result,
            detail=None if line.detail is None else redact(line.detail),
        ))
