"""Jobs: the one lock per deployment (a unique index on active jobs), status moves checked by the
UPDATE itself, cancel requests across servers, and the jobs a stopped server left behind."""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Mapping, Optional, Union, cast

from sqlalchemy import insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from serve.benchmark.job import LABEL as BENCHMARK_LABEL
from serve.benchmark.job import job_name_for
from webui import db
from webui.redact import redact, redact_value
from webui.status import ACTIVE, FINAL, INITIAL, JobStatus, allowed_from
from webui.store.base import AuditLine, JobActive, StoreBase, compact_json, json_or, status_words
from webui.store.deployments import deployment_row
from webui.store.records import DeploymentRecord, JobRecord

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


RESILIENCE_INTERRUPTED_HINT = (
    "the server stopped while this resilience check ran, so its report is lost. A node fault may have "
    "left a GPU node cordoned: kubectl get nodes (SchedulingDisabled), then kubectl uncordon NODE. "
    "Close this job to run another"
)


CONFORMANCE_INTERRUPTED_HINT = (
    "the server stopped while conformance ran, so its report is lost; its requests ended with the server and "
    "nothing in the cloud changed. Close this job, then run conformance again"
)


def interrupted_hint(operation: str, job_id: str) -> str:
    """What to do about a job a stopped server left behind: a benchmark is not a Pulumi update."""
    if operation == "benchmark":
        return BENCHMARK_INTERRUPTED_HINT.format(label=BENCHMARK_LABEL, name=job_name_for(job_id))
    if operation == "resilience":
        return RESILIENCE_INTERRUPTED_HINT
    if operation == "conformance":
        return CONFORMANCE_INTERRUPTED_HINT
    return INTERRUPTED_HINT


# Team mode: a server not seen for this long is gone, and the jobs it ran are orphans.
INSTANCE_STALE_SECONDS = 60.0


class JobRows(StoreBase):
    """Jobs and their moves; every final move writes its end event (and audit line) with it."""

    def active_job(self, deployment: str) -> Optional[str]:
        with self._read() as conn:
            return self._active_job_in(conn, deployment)

    def create_job(
        self, deployment: str, operation: str, engine: str, actor: str, running_status: str,
        prepare: Optional[Callable[[Optional[DeploymentRecord]], None]] = None,
    ) -> str:
        """Insert a queued job and mark the deployment busy, in one transaction. The unique index
        on active jobs is the lock: a second job for the deployment, from any server, is refused
        with JobActive.

        `prepare` is handed the deployment (None: no such row) as this transaction reads it, with
        its row locked (`_hold_deployment`), before the job is inserted: a change of its settings
        (`set_config`) on any server waits for that lock and then finds the job, and refuses. So
        the settings `prepare` reads (those an up records as deployed) are the ones the job runs
        with (issue 29 §3). If it raises, nothing is written."""
        job_id = uuid.uuid4().hex[:16]
        now = time.time()
        try:
            with self._write() as conn:
                row = self._hold_deployment(conn, deployment)
                active = self._active_job_in(conn, deployment)
                if active is not None:
                    raise JobActive(active)
                if prepare is not None:
                    prepare(None if row is None else cast(DeploymentRecord, deployment_row(row, full=True)))
                conn.execute(insert(db.jobs).values(
                    id=job_id, deployment=deployment, operation=str(operation), engine=engine,
                    status=INITIAL.value, previous_status=None if row is None else row["status"],
                    actor=actor, created_at=now, owner=self.instance_id,
                ))
                conn.execute(
                    update(db.deployments).where(db.deployments.c.name == deployment).values(
                        status=running_status, last_operation=str(operation), last_operation_at=now,
                        last_result=INITIAL.value, last_job=job_id, updated_at=now,
                    )
                )
        except IntegrityError:  # the index, the backstop: a writer that took no row lock (an older raypd)
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
            "summary": json_or(row["summary"]),
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
                summary=None if summary is None else compact_json(redact_value(summary)),
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
        wanted = select(db.jobs).where(j.status.in_(status_words(ACTIVE)))
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
            asked = conn.execute(update(db.jobs).where(j.id == job_id, j.status.in_(status_words(ACTIVE)))
                                 .values(cancel_requested_at=time.time()))
        return bool(asked.rowcount)

    def cancel_requests(self) -> list[str]:
        """This server's running jobs that someone asked to cancel."""
        j = db.jobs.c
        with self._read() as conn:
            return list(conn.execute(
                select(j.id).where(j.owner == self.instance_id, j.status.in_(status_words(ACTIVE)),
                                   j.cancel_requested_at.is_not(None))
            ).scalars())
