"""The job runner on its own: cancel races, late cancels, and failures of its own bookkeeping."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from tests.patience import PATIENCE_S, until
from tests.web.support import AUTH, FakeEngine, create, wait_for_job
from webui.engines.base import JobContext, OperationResult
from webui.jobs import Busy, JobRunner
from webui.store import Store


@pytest.fixture
def store(make_store) -> Store:
    """Every runner test runs on both dialects (SQLite and PostgreSQL)."""
    store = make_store()
    store.create_deployment("demo", "offline", {}, {})
    return store


def test_cancel_that_races_the_job_starting_still_stops_it(store):
    runner = JobRunner(store, workers=1)
    blocker, gate = threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def hold_the_worker(ctx: JobContext) -> OperationResult:
        blocker.wait(PATIENCE_S)
        return OperationResult()

    def work(ctx: JobContext) -> OperationResult:
        gate.wait(PATIENCE_S)
        seen["cancelled"] = ctx.cancelled
        return OperationResult()

    # The only worker is busy, so the job waits in the queue.
    runner.submit("other", "up", "offline", "t", "updating", hold_the_worker, lambda *a: None)
    job_id = runner.submit("demo", "up", "offline", "t", "updating", work, lambda *a: None)
    assert store.get_job(job_id)["status"] == "queued"
    original = store.finish_job

    def worker_starts_first(job: str, status: str, **kwargs: Any) -> bool:
        # The worker picks the job up between cancel's read ("queued") and its update.
        if kwargs.get("from_statuses") == ("queued",):
            blocker.set()
            until(lambda: store.get_job(job)["status"] == "running", "the worker to start the job", every=0.005)
        return original(job, status, **kwargs)

    store.finish_job = worker_starts_first  # type: ignore[method-assign]
    try:
        runner.cancel(job_id, "t", release=lambda: None)
    finally:
        store.finish_job = original  # type: ignore[method-assign]
    gate.set()
    runner.shutdown(wait=True)
    assert seen == {"cancelled": True}  # the cancel reached the running job instead of being lost
    assert any(e.get("status") == "cancelling" for e in store.events_after(job_id))


def test_a_cancel_that_comes_too_late_records_what_really_happened(store):
    runner = JobRunner(store, workers=1)
    started, gate = threading.Event(), threading.Event()
    finished: list[str] = []

    def work(ctx: JobContext) -> OperationResult:
        started.set()
        gate.wait(PATIENCE_S)  # like `pulumi up` on a file backend: `pulumi cancel` does not stop it
        return OperationResult(outputs={"modelId": "m"}, resources=[{"type": "t", "name": "n"}])

    job_id = runner.submit("demo", "up", "offline", "t", "updating", work,
                           lambda job, status, result: finished.append(status))
    assert started.wait(PATIENCE_S)
    runner.cancel(job_id, "t", release=lambda: None)
    gate.set()
    runner.shutdown(wait=True)
    job = store.get_job(job_id)
    assert job["status"] == "succeeded" and finished == ["succeeded"]
    messages = [e.get("message", "") for e in store.events_after(job_id)]
    assert any("too late" in m for m in messages)


def test_a_failing_database_fails_the_job_instead_of_leaving_it_running(store, caplog):
    runner = JobRunner(store, workers=1)
    finished: list[str] = []
    original = store.set_job_running

    def broken(job: str) -> bool:
        raise OSError("disk I/O error")

    store.set_job_running = broken  # type: ignore[method-assign]
    job_id = runner.submit("demo", "up", "offline", "t", "updating", lambda ctx: OperationResult(),
                           lambda job, status, result: finished.append(status))
    runner.shutdown(wait=True)
    store.set_job_running = original  # type: ignore[method-assign]
    job = store.get_job(job_id)
    assert job["status"] == "failed" and "the job store could not be written (disk I/O error)" in job["error"]
    assert finished == ["failed"]
    assert store.events_after(job_id)[-1]["kind"] == "end"
    assert "disk I/O error" in caplog.text


class IgnoresCancel(FakeEngine):
    """Finishes its operation whatever happens, like an update the CLI would not stop."""

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Optional[list[dict[str, Any]]] = None,
            deployed_plan: Optional[dict[str, Any]] = None) -> OperationResult:
        self.started.set()
        self.gate.wait(PATIENCE_S)
        return OperationResult(resources=[])


def test_a_destroy_that_finishes_despite_a_cancel_removes_the_deployment(make_app):
    engine = IgnoresCancel()
    app = make_app(engine=engine)
    client = app.test_client()
    create(client, "late")
    engine.gate.clear()
    job_id = client.delete("/api/v1/deployments/late", headers=AUTH).get_json()["job"]
    assert engine.started.wait(PATIENCE_S)
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 202
    engine.gate.set()
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    assert client.get("/api/v1/deployments/late", headers=AUTH).status_code == 404
    assert engine.removed == ["late"]


def test_a_queued_job_holds_its_deployment_as_a_running_one_does(store):
    store.create_deployment("other", "offline", {}, {})
    runner = JobRunner(store, workers=1)
    release = threading.Event()

    def hold(ctx: JobContext) -> OperationResult:
        release.wait(PATIENCE_S)
        return OperationResult()

    runner.submit("demo", "up", "offline", "t", "updating", hold, lambda *a: None)
    queued = runner.submit("other", "up", "offline", "t", "updating", hold, lambda *a: None)
    assert store.get_job(queued)["status"] == "queued"  # the only worker is busy
    with pytest.raises(Busy) as busy:
        runner.submit("other", "refresh", "offline", "t", "refreshing", hold, lambda *a: None)
    assert busy.value.job_id == queued
    release.set()
    runner.shutdown(wait=True)
