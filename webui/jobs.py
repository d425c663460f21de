"""Background jobs: one operation per deployment at a time, progress persisted as it happens.

A request never waits for an operation: `submit` records a queued job and returns its id, a small
thread pool runs it. The per-deployment lock is the job table itself (checked and written under one
in-process lock, and in the store under a lock on the deployment's row that a settings change also
takes, so servers sharing a store agree), so "is something running on this stack?" has one answer
that survives restarts: on start-up, jobs left queued or running are marked interrupted, with what
to do next.

Every job ends with an "end" event, which is what the SSE stream waits for: the store writes it in
the same transaction as the final status and the audit line (`Store.finish_job`), so a reader that
sees a job ended also finds its end event. In team mode (several servers on one PostgreSQL store)
each server heartbeats, and jobs of a server no longer seen are marked interrupted by the others.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

from webui.engines.base import EngineError, JobContext, OperationCancelled, OperationResult
from webui.redact import redact
from webui.status import JobStatus, Standing
from webui.store import (
    ACTIVE_STATUSES,
    INSTANCE_STALE_SECONDS,
    STORE_ERRORS,
    AuditLine,
    JobActive,
    Store,
    error_text,
)
from webui.store.records import DeploymentRecord, JobRecord

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("raypd.audit")

Work = Callable[[JobContext], OperationResult]
Finish = Callable[[str, str, Optional[OperationResult]], None]  # (job id, final status, result)


# What a broken store raises: the database driver's errors, and the OS's (a full disk, a vanished file).
STORAGE_ERRORS: tuple[type[BaseException], ...] = STORE_ERRORS
# Team mode: how often a server says it is alive and looks for orphaned jobs, and how often it
# looks for cancel requests another server took for one of its jobs.
HEARTBEAT_SECONDS = 10.0
CANCEL_POLL_SECONDS = 1.0
# A failure the store refused is tried again this soon, then ever less often, up to retry_seconds.
FIRST_RETRY_SECONDS = 0.25


class StorageFailed(Exception):
    """The job store stopped taking this job's records."""


class Busy(Exception):
    """Another job runs on this deployment; carries its id for the 409 answer."""

    def __init__(self, job_id: str):
        super().__init__(job_id)
        self.job_id = job_id


class JobRunner:
    def __init__(self, store: Store, workers: int = 2, retry_seconds: float = 5.0,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, stale_seconds: float = INSTANCE_STALE_SECONDS,
                 cancel_poll_seconds: float = CANCEL_POLL_SECONDS):
        self.store = store
        self.heartbeat_seconds = heartbeat_seconds
        self.cancel_poll_seconds = cancel_poll_seconds
        self.stale_seconds = stale_seconds
        self._heartbeat: Optional[threading.Thread] = None
        self.retry_seconds = retry_seconds
        self._unrecorded: dict[str, dict[str, Any]] = {}  # failed jobs the store could not take yet
        self._recorders: dict[str, Callable[[], None]] = {}  # how to write each of them down
        self._record_lock = threading.Lock()
        self._stopping = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="raypd-job")
        self._lock = threading.Lock()
        self._contexts: dict[str, JobContext] = {}

    def recover(self) -> list[JobRecord]:
        """Mark jobs a previous server left queued/running as interrupted (call once at start).

        Embedded, that is every such job (one server per RAYPD_HOME). In team mode it is only the
        jobs of servers not seen for `stale_seconds`; this server then heartbeats, and keeps
        looking for orphans, so a crashed peer's jobs do not stay "running" for ever.
        """
        if self.store.shared:
            self.store.register_instance()
        interrupted = self._interrupt_orphans()
        if self.store.shared and self._heartbeat is None:
            self._heartbeat = threading.Thread(target=self._beat, name="raypd-heartbeat", daemon=True)
            self._heartbeat.start()
        return interrupted

    def _interrupt_orphans(self) -> list[JobRecord]:
        interrupted = self.store.interrupt_active_jobs(stale_after=self.stale_seconds)
        for job in interrupted:
            audit_logger.info(
                "actor=system action=%s target=%s result=interrupted job=%s",
                job["operation"], job["deployment"], job["id"],
            )
        return interrupted

    def _beat(self) -> None:
        """Team mode, one thread: act on cancel requests for our jobs; now and then, say we are
        alive and interrupt the jobs of servers that stopped saying so."""
        next_beat = time.monotonic() + self.heartbeat_seconds
        while not self._stopping.wait(min(self.cancel_poll_seconds, self.heartbeat_seconds)):
            try:
                for job_id in self.store.cancel_requests():
                    with self._lock:
                        ctx = self._contexts.get(job_id)
                    if ctx is not None and not ctx.cancelled:
                        ctx.request_cancel()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.heartbeat_seconds
                    self.store.heartbeat()
                    self._interrupt_orphans()
            except STORAGE_ERRORS as exc:
                logger.warning("team mode: could not reach the job store (%s); retrying", error_text(exc))

    @contextmanager
    def idle(self, deployment: str) -> Iterator[None]:
        """Hold the job lock while nothing runs on `deployment` (raise Busy otherwise): a config
        change must not land under a running update, and no job may start during the change.
        That lock is this server's; the change's write itself (Store.set_config) is refused by
        the store when another server started a job meanwhile, and that is Busy too."""
        self._record_ended_on(deployment)
        with self._lock:
            active = self.store.active_job(deployment)
            if active is not None:
                raise Busy(active)
            try:
                yield
            except JobActive as taken:
                raise Busy(taken.job_id or "unknown") from None

    def submit(
        self, deployment: str, operation: str, engine: str, actor: str, running_status: str,
        work: Work, finish: Finish,
    ) -> str:
        return self.submit_prepared(deployment, operation, engine, actor, running_status,
                                    lambda record: (work, finish))

    def submit_prepared(
        self, deployment: str, operation: str, engine: str, actor: str, running_status: str,
        prepare: Callable[[Optional[DeploymentRecord]], tuple[Work, Finish]],
    ) -> str:
        """Queue the job `prepare` makes from the deployment's record. `prepare` runs in the
        store's transaction that inserts the job (Store.create_job), with the deployment's row
        locked: a config change, on this server or another, either committed before (and
        `prepare` reads it) or finds the job and is refused. So what `prepare` reads (the config
        an `up` will deploy and record as deployed) is what the job runs with (issue 29 §3: a
        PATCH that landed between reading the config and starting the job was deployed but
        recorded as not)."""
        self._record_ended_on(deployment)
        with self._lock:
            active = self.store.active_job(deployment)
            if active is not None:
                raise Busy(active)
            made: list[tuple[Work, Finish]] = []
            try:
                job_id = self.store.create_job(deployment, operation, engine, actor, running_status,
                                               prepare=lambda record: made.append(prepare(record)))
            except JobActive as taken:  # another server on the same store got there first
                raise Busy(taken.job_id or "unknown") from None
            work, finish = made[0]
            ctx = JobContext(job_id, lambda record: self._record(job_id, record))
            self._contexts[job_id] = ctx
        self.store.add_event(job_id, {"kind": "status", "status": JobStatus.QUEUED.value,
                                      "message": f"{operation} queued for {deployment}"})
        self._executor.submit(self._run, ctx, deployment, operation, actor, work, finish)
        return job_id

    def _record(self, job_id: str, record: dict[str, Any]) -> None:
        try:
            self.store.add_event(job_id, record)
            if "done" in record and "total" in record:
                self.store.set_progress(job_id, int(record["done"]), int(record["total"]))
        except STORAGE_ERRORS as exc:
            with self._lock:
                ctx = self._contexts.get(job_id)
            if ctx is not None:
                ctx.storage_failed(f"the job store could not be written ({error_text(exc)}); the job was stopped")
            raise

    def _run(
        self, ctx: JobContext, deployment: str, operation: str, actor: str, work: Work, finish: Finish,
    ) -> None:
        job_id = ctx.job_id
        try:
            self._run_job(ctx, deployment, operation, actor, work, finish)
        except Exception as exc:  # noqa: BLE001 - e.g. the database failed: never leave a job "running" silently
            logger.exception("job %s (%s %s): the job runner failed", job_id, operation, deployment)
            error = ctx.storage_error or (
                f"the job store could not be written ({error_text(exc)})" if isinstance(exc, STORAGE_ERRORS)
                else "internal error while recording the job (see the server log)")
            self._fail_until_recorded(job_id, deployment, operation, actor, error, finish)
        finally:
            with self._lock:
                self._contexts.pop(job_id, None)

    def _fail_until_recorded(
        self, job_id: str, deployment: str, operation: str, actor: str, error: str, finish: Finish,
    ) -> None:
        """End a job as failed even while the store refuses writes: answer "failed" from memory
        at once (`ended`), and keep trying to write it down until the store takes it: soon after
        at first, then every `retry_seconds`, for as long as this server runs; and at once when
        someone wants the deployment (`_record_ended`), so a freed disk or a database back up does
        not leave a failed job holding the deployment's lock until the next try."""
        with self._lock:
            self._unrecorded[job_id] = {"status": JobStatus.FAILED.value, "error": error, "finishedAt": time.time(),
                                        "deployment": deployment}
            self._recorders[job_id] = lambda: self._record_failure(
                job_id, deployment, operation, actor, error, finish)
        if self._record_ended(job_id):
            return

        def retry() -> None:
            wait = min(FIRST_RETRY_SECONDS, self.retry_seconds)
            while not self._stopping.wait(wait):
                if self._record_ended(job_id):
                    return
                wait = min(wait * 2, self.retry_seconds)

        threading.Thread(target=retry, name=f"raypd-record-{job_id}", daemon=True).start()

    def _record_failure(
        self, job_id: str, deployment: str, operation: str, actor: str, error: str, finish: Finish,
    ) -> None:
        job = self.store.get_job(job_id)
        if job is not None and job["status"] in ACTIVE_STATUSES:
            finish(job_id, JobStatus.FAILED.value, None)  # the deployment must not stay "updating"
            self._finish_job(job_id, deployment, operation, actor, JobStatus.FAILED, error)

    def _record_ended(self, job_id: str) -> bool:
        """Try to write down a failure the store refused so far; True once it is (or was) written."""
        with self._record_lock:  # one writer at a time: the retry thread, or a request wanting the deployment
            with self._lock:
                recorder = self._recorders.get(job_id)
            if recorder is None:
                return True
            try:
                recorder()
            except Exception:  # noqa: BLE001 - still broken: try again later
                logger.warning("job %s: the store still refuses to record its failure", job_id)
                return False
            with self._lock:
                self._unrecorded.pop(job_id, None)
                self._recorders.pop(job_id, None)
            return True

    def _record_ended_on(self, deployment: str) -> None:
        """Before asking whether `deployment` is busy: write down its failed jobs the store refused."""
        with self._lock:
            waiting = [job_id for job_id, ended in self._unrecorded.items() if ended["deployment"] == deployment]
        for job_id in waiting:
            self._record_ended(job_id)

    def ended(self, job_id: str) -> Optional[dict[str, Any]]:
        """A job's end that this process knows but could not write down yet (storage failure)."""
        with self._lock:
            found = self._unrecorded.get(job_id)
        return None if found is None else {k: v for k, v in found.items() if k != "deployment"}

    def _run_job(
        self, ctx: JobContext, deployment: str, operation: str, actor: str, work: Work, finish: Finish,
    ) -> None:
        job_id = ctx.job_id
        if not self.store.set_job_running(job_id):
            return  # cancelled while queued
        ctx.emit({"kind": "status", "status": JobStatus.RUNNING.value, "message": f"{operation} started"})
        status, error, result = JobStatus.SUCCEEDED.value, None, None
        try:
            result = work(ctx)
            if ctx.cancelled:
                # The engine finished anyway (a cancel came too late to stop anything): what
                # happened in the cloud is what counts, so the result is recorded as it is.
                ctx.emit({"kind": "diagnostic", "severity": "warning", "message": (
                    f"the cancel request came too late: {operation} had already finished"
                )})
        except OperationCancelled:
            status = JobStatus.CANCELLED.value
        except EngineError as exc:
            status, error = JobStatus.FAILED.value, exc.message
        except Exception:  # noqa: BLE001 - a bug must fail the job, not kill the worker
            logger.exception("job %s (%s %s) crashed", job_id, operation, deployment)
            status, error = JobStatus.FAILED.value, "internal error while running the operation (see the server log)"
        if status == JobStatus.CANCELLED:
            error = "cancelled on request"
        if ctx.storage_error is not None:
            raise StorageFailed(ctx.storage_error)  # -> _run: failed, recorded when the store can
        current = self.store.get_job(job_id)
        if current is None or current["status"] != JobStatus.RUNNING:
            return  # closed meanwhile (e.g. marked interrupted by a newer server): leave it be
        try:
            finish(job_id, status, result)
        except Exception:  # noqa: BLE001
            logger.exception("job %s: recording the result failed", job_id)
            status, error = JobStatus.FAILED.value, "the operation ended but its result could not be recorded"
        summary = {**ctx.findings, **(result.summary if result is not None else {})} or None
        self._finish_job(job_id, deployment, operation, actor, status, error, summary=summary)

    def _finish_job(
        self, job_id: str, deployment: str, operation: str, actor: str, status: str,
        error: Optional[str], summary: Optional[dict[str, Any]] = None,
        from_statuses: Optional[tuple[str, ...]] = None,
    ) -> bool:
        """Final status, end event and audit line in one transaction; the audit log line goes out
        just before it commits (so a client that sees the status finds the line too)."""

        def announce() -> None:
            audit_logger.info(
                "actor=%s action=%s target=%s result=%s job=%s%s", actor, operation, deployment,
                status, job_id, f" error={redact(error)!r}" if error else "",
            )

        return self.store.finish_job(
            job_id, status, error=error, summary=summary, from_statuses=from_statuses,
            audit=AuditLine(actor, operation, deployment, str(JobStatus(status).value), error),
            before_commit=announce,
        )

    def cancel(self, job_id: str, actor: str, release: Callable[[], None]) -> JobRecord:
        """Stop a queued or running job; an interrupted one is closed (after releasing its lock).

        Returns the job as it stands. Running jobs end as "cancelled" when their engine stops.
        """
        job = self.store.get_job(job_id)
        if job is None:
            raise KeyError(job_id)
        if job["status"] == JobStatus.QUEUED and self._finish_job(
            job_id, job["deployment"], job["operation"], actor, JobStatus.CANCELLED,
            "cancelled before it started", from_statuses=(JobStatus.QUEUED,),
        ):
            self._restore_status(job)
        elif job["status"] in ACTIVE_STATUSES:
            # Running, or it started between the read above and the update: stop the engine.
            with self._lock:
                ctx = self._contexts.get(job_id)
            if ctx is not None:
                self.store.add_event(job_id, {"kind": "status", "status": "cancelling",
                                              "message": f"cancel requested by {actor}"})
                ctx.request_cancel()
            elif self.store.shared and self.store.request_cancel(job_id):
                # Team mode: another server runs it; it sees the request within a second or so.
                self.store.add_event(job_id, {"kind": "status", "status": "cancelling",
                                              "message": f"cancel requested by {actor}"})
        elif job["status"] == JobStatus.INTERRUPTED:
            release()
            line = AuditLine(actor, "cancel", job["deployment"], JobStatus.CANCELLED.value,
                             "interrupted job closed")
            if not self.store.finish_job(
                job_id, JobStatus.CANCELLED, error="closed after an interruption",
                from_statuses=(JobStatus.INTERRUPTED,), message="interrupted job closed", audit=line,
            ):  # closed meanwhile (another request, another server): still say who tried
                self.store.add_audit(line.actor, line.action, line.target, line.result, line.detail)
            audit_logger.info("actor=%s action=cancel target=%s result=cancelled job=%s",
                              actor, job["deployment"], job_id)
        return self.store.get_job(job_id) or job

    def _restore_status(self, job: JobRecord) -> None:
        status = job.get("previousStatus") or Standing.CREATED.value
        self.store.update_deployment(job["deployment"], status=status)

    def shutdown(self, wait: bool = True) -> None:
        self._stopping.set()
        with self._lock:
            contexts = list(self._contexts.values())
        for ctx in contexts:
            ctx.request_cancel()
        self._executor.shutdown(wait=wait, cancel_futures=True)
        if wait and self._heartbeat is not None:
            self._heartbeat.join(5)
            self._heartbeat = None
            try:  # our jobs have ended: nothing of ours is left for the others to interrupt
                self.store.retire_instance()
            except STORAGE_ERRORS as exc:
                logger.warning("team mode: could not sign off from the job store (%s)", error_text(exc))
