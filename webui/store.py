"""The job store: deployments, jobs, progress events, check reports, benchmark runs, sessions and
the audit log.

The list page and the API read only this database, never the Pulumi CLI, so listing hundreds of
deployments costs one query. Every progress event is a row, so the SSE stream can replay a job from
any point (Last-Event-ID) and a restarted server still shows what happened. Nothing secret is ever
handed to the store; text from outside (engine messages, errors) passes through `redact` anyway.

It lives in SQLite (WAL) under RAYPD_HOME by default, or in PostgreSQL (RAYPD_DATABASE_URL, team
mode: several servers share it). SQL is built with SQLAlchemy Core from `webui.db`'s tables, so one
code path serves both; the schema is migrated by Alembic when the store opens.

A job's status only moves along `webui.deployments.lifecycle.TRANSITIONS`, checked in the UPDATE
itself (so a second server or a late worker cannot move it backwards), and a job's final status, its "end"
event and its audit line are committed in one transaction: whoever sees the final status can read
the end event, and the other way round.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import secrets
import shlex
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Union, cast

from sqlalchemy import and_, case, delete, func, insert, literal, or_, select, update
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from serve.benchmark.job import LABEL as BENCHMARK_LABEL
from serve.benchmark.job import job_name_for
from webui import db
from webui.db import STORE_ERRORS, DatabaseUrlError, error_text, safe_url
from webui.deployments.lifecycle import ACTIVE, FINAL, INITIAL, JobStatus, Standing, allowed_from
from webui.deployments.records import DeployedRecord, DeploymentRecord, JobRecord, ListedDeployment
from webui.redact import redact, redact_value

logger = logging.getLogger(__name__)

ACTIVE_STATUSES: tuple[JobStatus, ...] = ACTIVE
FINAL_STATUSES: tuple[JobStatus, ...] = FINAL
# In the order that works: a refresh cannot run while the dead update's lock is held.
INTERRUPTED_HINT = (
    "the server stopped while this job was running. 1) Close this job: that releases the stack's "
    "lock. 2) Run Refresh to read back what exists in the cloud. 3) If pending operations are "
    "listed, check those resources in the AWS console before clearing them"
)
BENCHMARK_INTERRUPTED_HINT = (
    "the server stopped while this benchmark ran, so its results are lost. Its Kubernetes Job stops by "
    "itself at its deadline (activeDeadlineSeconds) and is removed a day later with its ConfigMap; to stop "
    "it now: kubectl delete job --all-namespaces -l {label}={name}. Close this job to run another"
)


def interrupted_hint(operation: str, job_id: str) -> str:
    """What to do about a job a stopped server left behind: a benchmark is not a Pulumi update."""
    if operation == "benchmark":
        return BENCHMARK_INTERRUPTED_HINT.format(label=BENCHMARK_LABEL, name=job_name_for(job_id))
    return INTERRUPTED_HINT


# Team mode: a server not seen for this long is gone, and the jobs it ran are orphans.
INSTANCE_STALE_SECONDS = 60.0

__all__ = [
    "ACTIVE_STATUSES", "FINAL_STATUSES", "INTERRUPTED_HINT", "STORE_ERRORS", "AuditLine", "JobActive",
    "NameTaken", "Store", "StoreError", "error_text",
]


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


def _loads(text: Optional[str], default: Any = None) -> Any:
    return default if text is None else json.loads(text)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


def _words(statuses: tuple[Any, ...]) -> list[str]:
    return [JobStatus(status).value for status in statuses]


class Store:
    """`location`: a SQLite file path, or a database URL (sqlite:///..., postgresql://...)."""

    def __init__(self, location: Union[Path, str, URL], pool_size: int = 8):
        self.path: Optional[Path] = None
        self.instance_id = uuid.uuid4().hex[:16]  # this server, as the jobs it owns name it
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
        return (
            f"cannot open the job store {path}: {reason}. If the file is damaged, move it "
            f"aside (mv {shlex.quote(path)} {shlex.quote(path + '.broken')}) "
            "and start again: deployments are listed again from a new store, the Pulumi state "
            "is not in this file"
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

    # ---- deployments ----

    def create_deployment(
        self, name: str, engine: str, config: dict[str, Any], summary: dict[str, Any],
        status: str = Standing.CREATED.value,
    ) -> None:
        now = time.time()
        try:
            with self._write() as conn:
                conn.execute(insert(db.deployments).values(
                    name=name, engine=engine, status=status, config=_dumps(config),
                    summary=_dumps(summary), created_at=now, updated_at=now,
                ))
        except IntegrityError:
            raise NameTaken(name) from None

    def _deployment_row(self, row: RowMapping, full: bool) -> dict[str, Any]:
        record: dict[str, Any] = {
            "name": row["name"],
            "engine": row["engine"],
            "status": row["status"],
            "summary": _loads(row["summary"], {}),
            "createdAt": row["created_at"],
            "updatedAt": row["updated_at"],
            "lastOperation": row["last_operation"],
            "lastOperationAt": row["last_operation_at"],
            "lastResult": row["last_result"],
            "lastJob": row["last_job"],
        }
        if full:
            record["config"] = _loads(row["config"], {})
            record["outputs"] = _loads(row["outputs"])
            record["resources"] = _loads(row["resources"])
        return record

    def get_deployment(self, name: str) -> Optional[DeploymentRecord]:
        with self._read() as conn:
            row = conn.execute(
                select(db.deployments).where(db.deployments.c.name == name)
            ).mappings().first()
        return None if row is None else cast(DeploymentRecord, self._deployment_row(row, full=True))

    def list_deployments(self) -> list[ListedDeployment]:
        """Every deployment as the list shows it, in one query: `summary` is the deployed settings'
        (None when an older raypd recorded none) once an up recorded what it deployed, else the
        stack's own; `deployed` holds when, the token flag and whether the stack's config differs."""
        d, c = db.deployments.c, db.deployed_configs.c
        deployed = c.deployment.is_not(None)
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.status, d.created_at, d.updated_at,
                       d.last_operation, d.last_operation_at, d.last_result, d.last_job,
                       case((deployed, c.summary), else_=d.summary).label("summary"),
                       deployed.label("deployed"), c.time.label("deployed_at"),
                       c.token_replaced.label("token_replaced"),
                       # Both configs only where their text differs (one writer dumps both the same
                       # way, so equal text is the common case); then compared as JSON.
                       case((d.config != c.config, d.config)).label("config"),
                       case((d.config != c.config, c.config)).label("deployed_config"))
                .select_from(db.deployments.outerjoin(db.deployed_configs, c.deployment == d.name))
                .order_by(d.name)
            ).mappings().all()
        listed = []
        for row in rows:
            record = self._deployment_row(row, full=False)
            record["deployed"] = None if not row["deployed"] else {
                "time": row["deployed_at"], "tokenReplaced": bool(row["token_replaced"]),
                "configDiffers": row["config"] is not None
                and json.loads(row["config"]) != json.loads(row["deployed_config"]),
            }
            listed.append(cast(ListedDeployment, record))
        return listed

    _DEPLOYMENT_FIELDS = ("status", "outputs", "resources", "config", "summary", "last_operation",
                          "last_operation_at", "last_result", "last_job")
    _JSON_FIELDS = ("outputs", "resources", "config", "summary")

    def _deployment_values(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, value in fields.items():
            if key not in self._DEPLOYMENT_FIELDS:
                raise KeyError(key)
            if key in self._JSON_FIELDS:
                value = None if value is None else _dumps(redact_value(value))
            values[key] = value
        values["updated_at"] = time.time()
        return values

    def update_deployment(self, name: str, **fields: Any) -> None:
        values = self._deployment_values(fields)
        with self._write() as conn:
            conn.execute(update(db.deployments).where(db.deployments.c.name == name).values(**values))

    def delete_deployment(self, name: str) -> None:
        with self._write() as conn:
            conn.execute(delete(db.deployments).where(db.deployments.c.name == name))
            # Reports describe what was there; a new deployment of the same name starts clean.
            conn.execute(delete(db.checks).where(db.checks.c.deployment == name))
            conn.execute(delete(db.deployed_configs).where(db.deployed_configs.c.deployment == name))
            conn.execute(delete(db.stack_files).where(db.stack_files.c.stack == name))

    # ---- stack settings files (the engines' StackFiles) ----

    def stack_file(self, stack: str) -> Optional[str]:
        """The stack's Pulumi.<stack>.yaml as its engine last wrote it, or None."""
        c = db.stack_files.c
        with self._read() as conn:
            return conn.execute(select(c.text).where(c.stack == stack)).scalar()

    def save_stack_file(self, stack: str, text: str) -> None:
        """Written as given: it holds ciphertext and provider state, which a mask would corrupt."""
        with self._write() as conn:
            self._upsert(conn, db.stack_files, {"stack": stack, "text": text, "updated_at": time.time()},
                         ["stack"])

    def delete_stack_file(self, stack: str) -> None:
        with self._write() as conn:
            conn.execute(delete(db.stack_files).where(db.stack_files.c.stack == stack))

    def stacks_without_file(self) -> list[dict[str, Any]]:
        """Deployments whose settings file the store lacks (an older raypd kept it in one server's
        RAYPD_HOME): [{name, engine, config}]."""
        d, f = db.deployments.c, db.stack_files.c
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.config)
                .select_from(db.deployments.outerjoin(db.stack_files, f.stack == d.name))
                .where(f.stack.is_(None)).order_by(d.name)
            ).mappings().all()
        return [{"name": row["name"], "engine": row["engine"], "config": json.loads(row["config"])}
                for row in rows]

    # ---- jobs ----

    def active_job(self, deployment: str) -> Optional[str]:
        j = db.jobs.c
        with self._read() as conn:
            return conn.execute(
                select(j.id).where(j.deployment == deployment, j.status.in_(_words(ACTIVE)))
                .order_by(j.created_at).limit(1)
            ).scalar()

    def create_job(
        self, deployment: str, operation: str, engine: str, actor: str, running_status: str,
    ) -> str:
        """Insert a queued job and mark the deployment busy, in one transaction. The unique index
        on active jobs is the lock: a second job for the deployment, from any server, is refused
        with JobActive."""
        job_id = uuid.uuid4().hex[:16]
        now = time.time()
        try:
            with self._write() as conn:
                previous = conn.execute(
                    select(db.deployments.c.status).where(db.deployments.c.name == deployment)
                ).scalar()
                conn.execute(insert(db.jobs).values(
                    id=job_id, deployment=deployment, operation=str(operation), engine=engine,
                    status=INITIAL.value, previous_status=previous, actor=actor, created_at=now,
                    owner=self.instance_id,
                ))
                conn.execute(
                    update(db.deployments).where(db.deployments.c.name == deployment).values(
                        status=running_status, last_operation=str(operation), last_operation_at=now,
                        last_result=INITIAL.value, last_job=job_id, updated_at=now,
                    )
                )
        except IntegrityError:
            raise JobActive(self.active_job(deployment)) from None
        return job_id

    def _job_row(self, row: Mapping[Any, Any]) -> JobRecord:
        return {
            "id": row["id"],
            "deployment": row["deployment"],
            "operation": row["operation"],
            "engine": row["engine"],
            "status": row["status"],
            "previousStatus": row["previous_status"],
            "progress": {"done": row["done"], "total": row["total"]},
            "error": row["error"],
            "hint": row["hint"],
            "actor": row["actor"],
            "summary": _loads(row["summary"]),
            "createdAt": row["created_at"],
            "startedAt": row["started_at"],
            "finishedAt": row["finished_at"],
        }

    def get_job(self, job_id: str) -> Optional[JobRecord]:
        with self._read() as conn:
            row = conn.execute(select(db.jobs).where(db.jobs.c.id == job_id)).mappings().first()
        return None if row is None else self._job_row(row)

    def jobs_for(self, deployment: str, limit: int = 20) -> list[JobRecord]:
        """This deployment's jobs, newest first: a deployment made with the name of a removed one
        does not inherit that one's history (the jobs stay in the store, and in the audit log)."""
        j, d = db.jobs, db.deployments
        with self._read() as conn:
            rows = conn.execute(
                select(j).join(d, d.c.name == j.c.deployment)
                .where(j.c.deployment == deployment, j.c.created_at >= d.c.created_at)
                .order_by(j.c.created_at.desc()).limit(limit)
            ).mappings().all()
        return [self._job_row(row) for row in rows]

    def _move(
        self, conn: Connection, job_id: str, target: JobStatus, from_statuses: Any = None,
        **values: Any,
    ) -> bool:
        """The one place a job's status is written: only from a status the transition table allows
        (or the subset asked for), checked by the UPDATE itself. False when the job was elsewhere."""
        sources = allowed_from(target, from_statuses)
        result = conn.execute(
            update(db.jobs).where(db.jobs.c.id == job_id, db.jobs.c.status.in_(sources))
            .values(status=target.value, **values)
        )
        return bool(result.rowcount)

    def set_job_running(self, job_id: str) -> bool:
        """queued -> running; False when the job was cancelled before it started."""
        with self._write() as conn:
            moved = self._move(conn, job_id, JobStatus.RUNNING, started_at=time.time())
            if moved:
                conn.execute(update(db.deployments).where(db.deployments.c.last_job == job_id)
                             .values(last_result=JobStatus.RUNNING.value))
        return moved

    def set_progress(self, job_id: str, done: int, total: int) -> None:
        with self._write() as conn:
            conn.execute(update(db.jobs).where(db.jobs.c.id == job_id).values(done=done, total=total))

    def finish_job(
        self, job_id: str, status: Union[JobStatus, str], *, error: Optional[str] = None,
        hint: Optional[str] = None, summary: Optional[dict[str, Any]] = None,
        from_statuses: Optional[tuple[Any, ...]] = None, message: Optional[str] = None,
        audit: Optional[AuditLine] = None, before_commit: Optional[Callable[[], None]] = None,
    ) -> bool:
        """Move a job to a final status, with its "end" event (and `audit`, when given) in the same
        transaction; False (and nothing written) if the job could not make that move, e.g. it had
        already ended. `from_statuses` narrows where it may come from (default: the table's).

        `before_commit` runs once everything is written, just before COMMIT: the audit log line goes
        out there, so nobody can see the final status before the line exists.
        """
        target = JobStatus(status)
        if target not in FINAL:
            raise ValueError(f"{target.value} is not a final status")
        now = time.time()
        error = None if error is None else redact(error)
        with self._write() as conn:
            if not self._move(
                conn, job_id, target, from_statuses, error=error, hint=hint, finished_at=now,
                summary=None if summary is None else _dumps(redact_value(summary)),
            ):
                return False
            job = conn.execute(select(db.jobs).where(db.jobs.c.id == job_id)).mappings().one()
            done, total = job["done"], job["total"]
            if target is JobStatus.SUCCEEDED and done != total:
                done = total  # a finished job is at 100 %, whatever the last event counted
                conn.execute(update(db.jobs).where(db.jobs.c.id == job_id).values(done=done))
            conn.execute(update(db.deployments).where(db.deployments.c.last_job == job_id)
                         .values(last_result=target.value))
            record: dict[str, Any] = {"kind": "end", "status": target.value, "error": error}
            if hint is not None and target is JobStatus.INTERRUPTED:
                record["hint"] = hint
            record.update(done=done, total=total, message=message or (
                f"{job['operation']} {target.value}" + (f": {error}" if error else "")))
            self._append_event(conn, job_id, record, now)
            if audit is not None:
                self._append_audit(conn, audit, now)
            if before_commit is not None:
                before_commit()
        return True

    def interrupt_active_jobs(
        self, orphans_only: Optional[bool] = None, stale_after: float = INSTANCE_STALE_SECONDS,
    ) -> list[JobRecord]:
        """Mark jobs no live server runs as interrupted, with what to do next, each with its end
        event and audit line. Embedded (SQLite: one server per RAYPD_HOME) that is every active job
        at start-up; shared (team mode, `orphans_only`) only jobs whose server stopped being seen."""
        orphans_only = self.shared if orphans_only is None else orphans_only
        j, i = db.jobs.c, db.instances.c
        now = time.time()
        wanted = select(db.jobs).where(j.status.in_(_words(ACTIVE)))
        if orphans_only:
            alive = select(i.id).where(i.seen_at >= self._clock() - stale_after)
            wanted = wanted.where(or_(j.owner.is_(None), j.owner.not_in(alive)))
        else:
            wanted = wanted.where(or_(j.owner.is_(None), j.owner != self.instance_id))
        interrupted = []
        with self._write() as conn:
            for row in conn.execute(wanted.with_for_update()).mappings().all():
                hint = interrupted_hint(row["operation"], row["id"])
                if not self._move(conn, row["id"], JobStatus.INTERRUPTED, hint=hint, finished_at=now):
                    continue
                conn.execute(
                    update(db.deployments)
                    .where(db.deployments.c.name == row["deployment"], db.deployments.c.last_job == row["id"])
                    .values(status=JobStatus.INTERRUPTED.value, last_result=JobStatus.INTERRUPTED.value,
                            updated_at=now)
                )
                self._append_event(conn, row["id"], {
                    "kind": "end", "status": JobStatus.INTERRUPTED.value, "error": None,
                    "hint": hint, "done": row["done"], "total": row["total"],
                    "message": "interrupted: the server stopped while this job was running",
                }, now)
                self._append_audit(conn, AuditLine("system", row["operation"], row["deployment"],
                                                   JobStatus.INTERRUPTED.value), now)
                interrupted.append(self._job_row({**row, "status": JobStatus.INTERRUPTED.value,
                                                  "hint": hint, "finished_at": now}))
        return interrupted

    def request_cancel(self, job_id: str) -> bool:
        """Ask whichever server runs this active job to stop it (team mode: maybe not this one)."""
        j = db.jobs.c
        with self._write() as conn:
            asked = conn.execute(update(db.jobs).where(j.id == job_id, j.status.in_(_words(ACTIVE)))
                                 .values(cancel_requested_at=time.time()))
        return bool(asked.rowcount)

    def cancel_requests(self) -> list[str]:
        """This server's running jobs that someone asked to cancel."""
        j = db.jobs.c
        with self._read() as conn:
            return list(conn.execute(
                select(j.id).where(j.owner == self.instance_id, j.status.in_(_words(ACTIVE)),
                                   j.cancel_requested_at.is_not(None))
            ).scalars())

    # ---- servers sharing the store (team mode) ----

    def _clock(self) -> Any:
        """"Now" for liveness: the database server's clock in team mode (servers' own clocks may
        disagree by more than the staleness limit), this machine's for SQLite (one machine)."""
        if self.shared:
            return func.extract("epoch", func.clock_timestamp())
        return time.time()

    def register_instance(self) -> None:
        with self._write() as conn:
            now = conn.execute(select(self._clock())).scalar_one()
            self._upsert(conn, db.instances, {
                "id": self.instance_id, "host": socket.gethostname(), "pid": os.getpid(),
                "started_at": float(now), "seen_at": float(now),
            }, ["id"])

    def heartbeat(self) -> None:
        """This server is alive: its running jobs are not orphans."""
        with self._write() as conn:
            seen = conn.execute(update(db.instances).where(db.instances.c.id == self.instance_id)
                                .values(seen_at=self._clock()))
        if not seen.rowcount:  # removed meanwhile (by hand, or a store restored from backup)
            self.register_instance()

    def retire_instance(self) -> None:
        with self._write() as conn:
            conn.execute(delete(db.instances).where(db.instances.c.id == self.instance_id))

    # ---- events ----

    def _append_event(self, conn: Connection, job_id: str, record: dict[str, Any], now: float) -> int:
        # Lock the job's row first (PostgreSQL; SQLite's IMMEDIATE transaction already holds the
        # write lock), so two writers cannot pick one seq.
        conn.execute(select(db.jobs.c.id).where(db.jobs.c.id == job_id).with_for_update())
        seq = conn.execute(
            select(func.coalesce(func.max(db.events.c.seq), 0) + 1).where(db.events.c.job == job_id)
        ).scalar_one()
        conn.execute(insert(db.events).values(job=job_id, seq=seq, time=now,
                                              data=_dumps(redact_value(record))))
        return int(seq)

    def add_event(self, job_id: str, record: dict[str, Any]) -> int:
        """Append one progress record; returns its sequence number (1, 2, ...) within the job."""
        with self._write() as conn:
            return self._append_event(conn, job_id, record, time.time())

    def events_after(self, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        e = db.events.c
        with self._read() as conn:
            rows = conn.execute(
                select(e.seq, e.time, e.data).where(e.job == job_id, e.seq > after)
                .order_by(e.seq).limit(limit)
            ).mappings().all()
        return self._events(rows)

    def latest_events(self, job_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """The newest `limit` events, oldest first: a long job's page shows where it is now."""
        e = db.events.c
        with self._read() as conn:
            rows = conn.execute(
                select(e.seq, e.time, e.data).where(e.job == job_id).order_by(e.seq.desc()).limit(limit)
            ).mappings().all()
        return self._events(list(reversed(rows)))

    def _events(self, rows: Any) -> list[dict[str, Any]]:
        events = []
        for row in rows:
            event = json.loads(row["data"])
            event["seq"] = row["seq"]
            event["time"] = row["time"]
            events.append(event)
        return events

    def resource_durations(self, engine: str, operation: str = "up", jobs: int = 20) -> list[tuple[str, str, float]]:
        """(name, type, seconds) of every resource step of the last succeeded jobs of an engine: from its
        "started" event to its "finished" one. What this app measured beats any published figure."""
        j, e = db.jobs.c, db.events.c
        recent = (
            select(j.id).where(j.engine == engine, j.operation == operation,
                               j.status == JobStatus.SUCCEEDED.value)
            .order_by(j.created_at.desc()).limit(jobs).subquery()
        )
        with self._read() as conn:
            rows = conn.execute(
                select(e.job, e.time, e.data).join(recent, e.job == recent.c.id)
                .where(e.data.like('%"kind":"resource"%')).order_by(e.job, e.seq)
            ).mappings().all()
        started: dict[tuple[str, str], float] = {}
        samples: list[tuple[str, str, float]] = []
        for row in rows:
            record = json.loads(row["data"])
            key = (row["job"], str(record.get("name")))
            if record.get("state") == "started":
                started[key] = row["time"]
            elif record.get("state") == "finished" and key in started:
                samples.append((key[1], str(record.get("type")), row["time"] - started.pop(key)))
        return samples

    # ---- what is deployed: the last successful up (offline: the last plan), apart from the
    # stack's current config in `deployments`, which may hold changes no up has deployed yet ----

    def set_deployed_config(
        self, deployment: str, config: dict[str, Any], summary: Optional[dict[str, Any]] = None,
        plan: Optional[dict[str, Any]] = None, job: Optional[str] = None,
    ) -> None:
        """Record what an up deployed. Whatever token the stack had was deployed with it, so the
        "token replaced since" flag starts clear."""
        with self._write() as conn:
            self._upsert(conn, db.deployed_configs, self._deployed_values(deployment, config, summary, plan, job),
                         ["deployment"])

    @staticmethod
    def _deployed_values(deployment: str, config: dict[str, Any], summary: Optional[dict[str, Any]],
                         plan: Optional[dict[str, Any]], job: Optional[str]) -> dict[str, Any]:
        return {
            "deployment": deployment, "config": _dumps(redact_value(config)), "time": time.time(),
            "summary": None if summary is None else _dumps(redact_value(summary)),
            "plan": None if plan is None else _dumps(redact_value(plan)),
            "job": job, "token_replaced": False,
        }

    def record_deployed(
        self, deployment: str, fields: Mapping[str, Any], config: dict[str, Any],
        summary: Optional[dict[str, Any]], plan: Optional[dict[str, Any]] = None, job: Optional[str] = None,
    ) -> None:
        """An up succeeded: the deployment's new status, outputs and resources (`fields`, as for
        update_deployment) and what it deployed, in one transaction, so no reader sees the one
        without the other."""
        values = self._deployment_values(fields)
        with self._write() as conn:
            conn.execute(update(db.deployments).where(db.deployments.c.name == deployment).values(**values))
            self._upsert(conn, db.deployed_configs, self._deployed_values(deployment, config, summary, plan, job),
                         ["deployment"])

    def deployed(self, deployment: str) -> Optional[DeployedRecord]:
        """{config, summary, plan, job, time, tokenReplaced} of the last successful up, or None
        when nothing was ever deployed (or planned, offline). `summary` and `plan` may be None in
        rows written before version 4."""
        c = db.deployed_configs.c
        with self._read() as conn:
            row = conn.execute(select(db.deployed_configs).where(c.deployment == deployment)).mappings().first()
        if row is None:
            return None
        return {"config": json.loads(row["config"]), "summary": _loads(row["summary"]),
                "plan": _loads(row["plan"]), "job": row["job"], "time": row["time"],
                "tokenReplaced": bool(row["token_replaced"])}

    def deployed_config(self, deployment: str) -> Optional[dict[str, Any]]:
        deployed = self.deployed(deployment)
        return None if deployed is None else deployed["config"]

    def set_config(
        self, deployment: str, config: dict[str, Any], summary: dict[str, Any],
        token_replaced: Optional[bool] = None,
    ) -> None:
        """The stack's settings as a change wrote them (or a discard put them back), and in the same
        transaction the deployed record's token flag: True when a new HF token went to the stack
        since the deploy, False when the stack has no token the deploy lacked, None: unchanged."""
        now = time.time()
        with self._write() as conn:
            conn.execute(update(db.deployments).where(db.deployments.c.name == deployment).values(
                config=_dumps(redact_value(config)), summary=_dumps(redact_value(summary)), updated_at=now))
            if token_replaced is not None:
                conn.execute(update(db.deployed_configs).where(db.deployed_configs.c.deployment == deployment)
                             .values(token_replaced=token_replaced))

    def fill_in_deployed(
        self, deployment: str, *, config: Optional[dict[str, Any]] = None,
        summary: Optional[dict[str, Any]] = None, plan: Optional[dict[str, Any]] = None,
        at: Optional[float] = None,
    ) -> None:
        """Complete a record an older raypd wrote: insert it (with `config`) when there is none,
        and set only what is still missing (NULL), so two servers starting together cannot
        overwrite what an up recorded meanwhile."""
        c = db.deployed_configs.c
        with self._write() as conn:
            exists = conn.execute(select(c.deployment).where(c.deployment == deployment)).scalar()
            if exists is None:
                if config is None:
                    return
                dialect = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
                conn.execute(dialect.insert(db.deployed_configs).values(
                    deployment=deployment, config=_dumps(redact_value(config)), time=at or time.time(),
                    token_replaced=False,
                ).on_conflict_do_nothing(index_elements=["deployment"]))
            for column, value in (("summary", summary), ("plan", plan)):
                if value is not None:
                    conn.execute(update(db.deployed_configs)
                                 .where(c.deployment == deployment, c[column].is_(None))
                                 .values({column: _dumps(redact_value(value))}))

    def incomplete_deployed(self) -> list[dict[str, Any]]:
        """Deployments whose deployed record an older raypd left incomplete: none at all although
        the status says something stands, or no summary, or (offline) no plan."""
        d, c = db.deployments.c, db.deployed_configs.c
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.status, d.config, d.last_operation_at,
                       c.deployment.label("recorded"), c.config.label("deployed_config"),
                       (c.summary.is_(None)).label("no_summary"), (c.plan.is_(None)).label("no_plan"))
                .select_from(db.deployments.outerjoin(db.deployed_configs, c.deployment == d.name))
                .where(or_(c.deployment.is_(None), c.summary.is_(None),
                           and_(d.engine == "offline", c.plan.is_(None))))
                .order_by(d.name)
            ).mappings().all()
        return [{"name": row["name"], "engine": row["engine"], "status": row["status"],
                 "config": json.loads(row["config"]), "lastOperationAt": row["last_operation_at"],
                 "deployed": None if row["recorded"] is None else {
                     "config": json.loads(row["deployed_config"]), "summary": not row["no_summary"],
                     "plan": not row["no_plan"]}}
                for row in rows]

    # ---- check reports (Contract 5): the last one of each kind per deployment ----

    def save_check(self, deployment: str, report: dict[str, Any], job: Optional[str]) -> None:
        with self._write() as conn:
            self._upsert(conn, db.checks, {
                "deployment": deployment, "kind": report["kind"], "job": job, "time": time.time(),
                "report": _dumps(redact_value(report)),
            }, ["deployment", "kind"])

    def last_checks(self, deployment: str) -> dict[str, dict[str, Any]]:
        """{kind: {"report", "job", "time"}} for the kinds that ever ran on this deployment."""
        c = db.checks.c
        with self._read() as conn:
            rows = conn.execute(
                select(c.kind, c.job, c.time, c.report).where(c.deployment == deployment)
            ).mappings().all()
        return {row["kind"]: {"report": json.loads(row["report"]), "job": row["job"],
                              "time": row["time"]} for row in rows}

    # ---- benchmark runs: summary and settings as JSON, records as gzip JSON lines ----

    def save_benchmark(self, run_id: str, deployment: str, label: str, actor: Optional[str],
                       settings: dict[str, Any], summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
        packed = gzip.compress("".join(_dumps(r) + "\n" for r in records).encode("utf-8"), compresslevel=6)
        with self._write() as conn:
            conn.execute(insert(db.benchmark_runs).values(
                id=run_id, deployment=deployment, label=label, created_at=time.time(), actor=actor,
                settings=_dumps(redact_value(settings)), summary=_dumps(redact_value(summary)), records=packed))

    def _benchmark_row(self, row: RowMapping) -> dict[str, Any]:
        return {"id": row["id"], "deployment": row["deployment"], "label": row["label"],
                "createdAt": row["created_at"], "actor": row["actor"],
                "settings": json.loads(row["settings"]), "summary": json.loads(row["summary"])}

    def benchmark_runs(self, deployment: Optional[str] = None, limit: int = 200) -> list[dict[str, Any]]:
        """Runs without their records, newest first; one deployment's or everyone's."""
        c = db.benchmark_runs.c
        query = select(c.id, c.deployment, c.label, c.created_at, c.actor, c.settings, c.summary)
        if deployment is not None:
            query = query.where(c.deployment == deployment)
        with self._read() as conn:
            rows = conn.execute(query.order_by(c.created_at.desc()).limit(limit)).mappings().all()
        return [self._benchmark_row(row) for row in rows]

    def benchmark_run(self, run_id: str) -> Optional[dict[str, Any]]:
        c = db.benchmark_runs.c
        with self._read() as conn:
            row = conn.execute(select(c.id, c.deployment, c.label, c.created_at, c.actor, c.settings, c.summary)
                               .where(c.id == run_id)).mappings().first()
        return None if row is None else self._benchmark_row(row)

    def benchmark_records(self, run_id: str) -> Optional[bytes]:
        """The run's requests.jsonl, gzip-compressed as stored."""
        c = db.benchmark_runs.c
        with self._read() as conn:
            packed = conn.execute(select(c.records).where(c.id == run_id)).scalar()
        return None if packed is None else bytes(packed)

    # ---- browser sessions (the cookie carries the id; logging out ends it here) ----

    def start_session(self) -> str:
        session_id = secrets.token_urlsafe(24)
        with self._write() as conn:
            conn.execute(insert(db.sessions).values(id=session_id, created=time.time()))
        return session_id

    def session_active(self, session_id: str, max_age_seconds: float) -> bool:
        s = db.sessions.c
        with self._read() as conn:
            created = conn.execute(
                select(s.created).where(and_(s.id == session_id, s.ended.is_(None)))
            ).scalar()
        return created is not None and time.time() - created <= max_age_seconds

    def end_session(self, session_id: str) -> None:
        with self._write() as conn:
            conn.execute(update(db.sessions).where(db.sessions.c.id == session_id).values(ended=time.time()))

    # ---- audit ----

    def _append_audit(self, conn: Connection, line: AuditLine, now: float) -> None:
        conn.execute(insert(db.audit).values(
            time=now, actor=line.actor, action=line.action, target=line.target, result=line.result,
            detail=None if line.detail is None else redact(line.detail),
        ))

    def add_audit(
        self, actor: str, action: str, target: str, result: str, detail: Optional[str] = None,
    ) -> None:
        with self._write() as conn:
            self._append_audit(conn, AuditLine(actor, action, target, result, detail), time.time())

    def audit_entries(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(select(db.audit).order_by(db.audit.c.id.desc()).limit(limit)).mappings().all()
        return [dict(row) for row in rows]
