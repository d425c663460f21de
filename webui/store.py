"""SQLite store (WAL) for deployments, jobs, progress events and the audit log.

The list page and the API read only this database, never the Pulumi CLI, so listing hundreds of
deployments costs one query. Every progress event is a row, so the SSE stream can replay a job from
any point (Last-Event-ID) and a restarted server still shows what happened. Nothing secret is ever
handed to the store; text from outside (engine messages, errors) passes through `redact` anyway.

Connections come from a small pool: SQLite connections are cheap but not shareable across threads,
and the app serves requests and runs jobs on several threads.
"""

from __future__ import annotations

import json
import queue
import secrets
import shlex
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from webui.redact import redact, redact_value

ACTIVE_STATUSES = ("queued", "running")
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "interrupted")
_ACTIVE_MARKS = ", ".join("?" for _ in ACTIVE_STATUSES)
# In the order that works: a refresh cannot run while the dead update's lock is held.
INTERRUPTED_HINT = (
    "the server stopped while this job was running. 1) Close this job: that releases the stack's "
    "lock. 2) Run Refresh to read back what exists in the cloud. 3) If pending operations are "
    "listed, check those resources in the AWS console before clearing them"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    summary TEXT NOT NULL,
    outputs TEXT,
    resources TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_operation TEXT,
    last_operation_at REAL,
    last_result TEXT,
    last_job TEXT
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    deployment TEXT NOT NULL,
    operation TEXT NOT NULL,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    previous_status TEXT,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    hint TEXT,
    actor TEXT,
    summary TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_deployment ON jobs (deployment, created_at);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status);
-- The per-deployment lock lives in the store, not in a process: two servers on one store (a lock
-- file removed by hand) still cannot run two jobs on one deployment.
CREATE UNIQUE INDEX IF NOT EXISTS one_active_job_per_deployment ON jobs (deployment)
    WHERE status IN ('queued', 'running');
CREATE TABLE IF NOT EXISTS events (
    job TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (job, seq)
);
CREATE TABLE IF NOT EXISTS checks (
    deployment TEXT NOT NULL,
    kind TEXT NOT NULL,
    job TEXT,
    time REAL NOT NULL,
    report TEXT NOT NULL,
    PRIMARY KEY (deployment, kind)
);
CREATE TABLE IF NOT EXISTS deployed_configs (
    deployment TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    ended REAL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL,
    detail TEXT
);
"""


class StoreError(Exception):
    """The store cannot be opened; the message says which file and what to do."""


class NameTaken(Exception):
    """A deployment with this name already exists."""


class JobActive(Exception):
    """A job is already queued or running on this deployment (`job_id`, when it could be read)."""

    def __init__(self, job_id: Optional[str]):
        super().__init__(job_id or "")
        self.job_id = job_id


def _loads(text: Optional[str], default: Any = None) -> Any:
    return default if text is None else json.loads(text)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=False)


class Store:
    def __init__(self, path: Path, pool_size: int = 8):
        self.path = Path(path)
        self._pool: "queue.LifoQueue[sqlite3.Connection]" = queue.LifoQueue(maxsize=pool_size)
        self._closed = False
        try:
            with self._connection() as conn:
                conn.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:  # not a database, unreadable, read-only disk, ...
            self.close()
            raise StoreError(
                f"cannot open the job store {self.path}: {exc}. If the file is damaged, move it "
                f"aside (mv {shlex.quote(str(self.path))} {shlex.quote(str(self.path) + '.broken')}) "
                "and start again: deployments are listed again from a new store, the Pulumi state "
                "is not in this file"
            ) from None

    # ---- connections ----

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        try:
            conn = self._pool.get_nowait()
        except queue.Empty:
            conn = self._open()
        try:
            yield conn
        finally:
            if self._closed:
                conn.close()
            else:
                try:
                    self._pool.put_nowait(conn)
                except queue.Full:
                    conn.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._pool.get_nowait().close()
            except queue.Empty:
                break

    # ---- deployments ----

    def create_deployment(
        self, name: str, engine: str, config: dict[str, Any], summary: dict[str, Any],
        status: str = "created",
    ) -> None:
        now = time.time()
        try:
            with self._connection() as conn:
                conn.execute(
                    "INSERT INTO deployments (name, engine, status, config, summary, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (name, engine, status, _dumps(config), _dumps(summary), now, now),
                )
        except sqlite3.IntegrityError:
            raise NameTaken(name) from None

    def _deployment_row(self, row: sqlite3.Row, full: bool) -> dict[str, Any]:
        record = {
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

    def get_deployment(self, name: str) -> Optional[dict[str, Any]]:
        with self._connection() as conn:
            row = conn.execute("SELECT * FROM deployments WHERE name = ?", (name,)).fetchone()
        return None if row is None else self._deployment_row(row, full=True)

    def list_deployments(self) -> list[dict[str, Any]]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT name, engine, status, summary, created_at, updated_at, last_operation, "
                "last_operation_at, last_result, last_job FROM deployments ORDER BY name"
            ).fetchall()
        return [self._deployment_row(row, full=False) for row in rows]

    def update_deployment(self, name: str, **fields: Any) -> None:
        columns = {
            "status": "status", "outputs": "outputs", "resources": "resources",
            "config": "config", "summary": "summary",
            "last_operation": "last_operation", "last_operation_at": "last_operation_at",
            "last_result": "last_result", "last_job": "last_job",
        }
        sets, values = [], []
        for key, value in fields.items():
            column = columns[key]
            if key in ("outputs", "resources", "config", "summary"):
                value = None if value is None else _dumps(redact_value(value))
            sets.append(f"{column} = ?")
            values.append(value)
        sets.append("updated_at = ?")
        values.append(time.time())
        with self._connection() as conn:
            conn.execute(f"UPDATE deployments SET {', '.join(sets)} WHERE name = ?", (*values, name))

    def delete_deployment(self, name: str) -> None:
        with self._transaction() as conn:
            conn.execute("DELETE FROM deployments WHERE name = ?", (name,))
            # Reports describe what was there; a new deployment of the same name starts clean.
            conn.execute("DELETE FROM checks WHERE deployment = ?", (name,))
            conn.execute("DELETE FROM deployed_configs WHERE deployment = ?", (name,))

    # ---- jobs ----

    def active_job(self, deployment: str) -> Optional[str]:
        with self._connection() as conn:
            row = conn.execute(
                f"SELECT id FROM jobs WHERE deployment = ? AND status IN ({_ACTIVE_MARKS}) "
                "ORDER BY created_at LIMIT 1",
                (deployment, *ACTIVE_STATUSES),
            ).fetchone()
        return None if row is None else row["id"]

    def create_job(
        self, deployment: str, operation: str, engine: str, actor: str, running_status: str,
    ) -> str:
        """Insert a queued job and mark the deployment busy, in one transaction."""
        job_id = uuid.uuid4().hex[:16]
        now = time.time()
        try:
            self._insert_job(job_id, now, deployment, operation, engine, actor, running_status)
        except sqlite3.IntegrityError:
            raise JobActive(self.active_job(deployment)) from None
        return job_id

    def _insert_job(
        self, job_id: str, now: float, deployment: str, operation: str, engine: str, actor: str,
        running_status: str,
    ) -> None:
        with self._transaction() as conn:
            row = conn.execute("SELECT status FROM deployments WHERE name = ?", (deployment,)).fetchone()
            previous = row["status"] if row else None
            conn.execute(
                "INSERT INTO jobs (id, deployment, operation, engine, status, previous_status, actor, "
                "created_at) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?)",
                (job_id, deployment, operation, engine, previous, actor, now),
            )
            conn.execute(
                "UPDATE deployments SET status = ?, last_operation = ?, last_operation_at = ?, "
                "last_result = 'queued', last_job = ?, updated_at = ? WHERE name = ?",
                (running_status, operation, now, job_id, now, deployment),
            )

    def _job_row(self, row: sqlite3.Row) -> dict[str, Any]:
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

    def get_job(self, job_id: str) -> Optional[dict[str, Any]]:
        with self._connection() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else self._job_row(row)

    def jobs_for(self, deployment: str, limit: int = 20) -> list[dict[str, Any]]:
        """This deployment's jobs, newest first: a deployment made with the name of a removed one
        does not inherit that one's history (the jobs stay in the store, and in the audit log)."""
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT j.* FROM jobs j JOIN deployments d ON d.name = j.deployment "
                "WHERE j.deployment = ? AND j.created_at >= d.created_at "
                "ORDER BY j.created_at DESC LIMIT ?",
                (deployment, limit),
            ).fetchall()
        return [self._job_row(row) for row in rows]

    def set_job_running(self, job_id: str) -> bool:
        """queued -> running; False when the job was cancelled before it started."""
        with self._connection() as conn:
            cursor = conn.execute(
                "UPDATE jobs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued'",
                (time.time(), job_id),
            )
            if cursor.rowcount:
                conn.execute(
                    "UPDATE deployments SET last_result = 'running' WHERE last_job = ?", (job_id,)
                )
        return bool(cursor.rowcount)

    def set_progress(self, job_id: str, done: int, total: int) -> None:
        with self._connection() as conn:
            conn.execute("UPDATE jobs SET done = ?, total = ? WHERE id = ?", (done, total, job_id))

    def finish_job(
        self, job_id: str, status: str, *, error: Optional[str] = None, hint: Optional[str] = None,
        summary: Optional[dict[str, Any]] = None, from_statuses: tuple[str, ...] = ACTIVE_STATUSES,
    ) -> bool:
        """Move an active job to a final status; False if it had already ended (e.g. cancelled)."""
        marks = ", ".join("?" for _ in from_statuses)
        with self._transaction() as conn:
            cursor = conn.execute(
                f"UPDATE jobs SET status = ?, error = ?, hint = ?, summary = ?, finished_at = ? "
                f"WHERE id = ? AND status IN ({marks})",
                (
                    status, None if error is None else redact(error), hint,
                    None if summary is None else _dumps(redact_value(summary)), time.time(),
                    job_id, *from_statuses,
                ),
            )
            if cursor.rowcount:
                conn.execute(
                    "UPDATE deployments SET last_result = ? WHERE last_job = ?", (status, job_id)
                )
        return bool(cursor.rowcount)

    def interrupt_active_jobs(self) -> list[dict[str, Any]]:
        """After a restart nothing is running: mark leftovers interrupted, with what to do next."""
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT * FROM jobs WHERE status IN ({_ACTIVE_MARKS})", ACTIVE_STATUSES,
            ).fetchall()
            now = time.time()
            for row in rows:
                conn.execute(
                    "UPDATE jobs SET status = 'interrupted', hint = ?, finished_at = ? WHERE id = ?",
                    (INTERRUPTED_HINT, now, row["id"]),
                )
                conn.execute(
                    "UPDATE deployments SET status = 'interrupted', last_result = 'interrupted', "
                    "updated_at = ? WHERE name = ? AND last_job = ?",
                    (now, row["deployment"], row["id"]),
                )
        return [self._job_row(row) for row in rows]

    # ---- events ----

    def add_event(self, job_id: str, record: dict[str, Any]) -> int:
        """Append one progress record; returns its sequence number (1, 2, ...) within the job."""
        now = time.time()
        body = redact_value(record)
        # IMMEDIATE: take the write lock before reading MAX(seq), so two writers cannot pick one seq.
        with self._transaction() as conn:
            row = conn.execute(
                "INSERT INTO events (job, seq, time, data) VALUES "
                "(?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job = ?), ?, ?) "
                "RETURNING seq",
                (job_id, job_id, now, _dumps(body)),
            ).fetchone()
        return int(row["seq"])

    def events_after(self, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT seq, time, data FROM events WHERE job = ? AND seq > ? ORDER BY seq LIMIT ?",
                (job_id, after, limit),
            ).fetchall()
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
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT e.job, e.time, e.data FROM events e JOIN (SELECT id FROM jobs WHERE engine = ? "
                "AND operation = ? AND status = 'succeeded' ORDER BY created_at DESC LIMIT ?) j "
                "ON e.job = j.id WHERE e.data LIKE '%\"kind\":\"resource\"%' ORDER BY e.job, e.seq",
                (engine, operation, jobs),
            ).fetchall()
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

    # ---- the config of the last successful up (what a change is measured against) ----

    def set_deployed_config(self, deployment: str, config: dict[str, Any]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO deployed_configs (deployment, config, time) VALUES (?, ?, ?) "
                "ON CONFLICT (deployment) DO UPDATE SET config = excluded.config, time = excluded.time",
                (deployment, _dumps(redact_value(config)), time.time()),
            )

    def deployed_config(self, deployment: str) -> Optional[dict[str, Any]]:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT config FROM deployed_configs WHERE deployment = ?", (deployment,)
            ).fetchone()
        return None if row is None else json.loads(row["config"])

    # ---- check reports (Contract 5): the last one of each kind per deployment ----

    def save_check(self, deployment: str, report: dict[str, Any], job: Optional[str]) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO checks (deployment, kind, job, time, report) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (deployment, kind) DO UPDATE SET job = excluded.job, "
                "time = excluded.time, report = excluded.report",
                (deployment, report["kind"], job, time.time(), _dumps(redact_value(report))),
            )

    def last_checks(self, deployment: str) -> dict[str, dict[str, Any]]:
        """{kind: {"report", "job", "time"}} for the kinds that ever ran on this deployment."""
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT kind, job, time, report FROM checks WHERE deployment = ?", (deployment,)
            ).fetchall()
        return {row["kind"]: {"report": json.loads(row["report"]), "job": row["job"],
                              "time": row["time"]} for row in rows}

    # ---- browser sessions (the cookie carries the id; logging out ends it here) ----

    def start_session(self) -> str:
        session_id = secrets.token_urlsafe(24)
        with self._connection() as conn:
            conn.execute("INSERT INTO sessions (id, created) VALUES (?, ?)", (session_id, time.time()))
        return session_id

    def session_active(self, session_id: str, max_age_seconds: float) -> bool:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT created FROM sessions WHERE id = ? AND ended IS NULL", (session_id,)
            ).fetchone()
        return row is not None and time.time() - row["created"] <= max_age_seconds

    def end_session(self, session_id: str) -> None:
        with self._connection() as conn:
            conn.execute("UPDATE sessions SET ended = ? WHERE id = ?", (time.time(), session_id))

    # ---- audit ----

    def add_audit(
        self, actor: str, action: str, target: str, result: str, detail: Optional[str] = None,
    ) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO audit (time, actor, action, target, result, detail) VALUES (?, ?, ?, ?, ?, ?)",
                (time.time(), actor, action, target, result, None if detail is None else redact(detail)),
            )

    def audit_entries(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT * FROM audit ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [dict(row) for row in rows]
