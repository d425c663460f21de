"""A store that stops taking writes mid-job (a full disk) ends the job as failed, never stuck."""

from __future__ import annotations

import sqlite3
import time
from typing import Any, Callable

from tests.web.support import AUTH, create, wait_for_job


class DiskFull:
    """Makes the app's store refuse every write while `full` is set, as SQLite does on ENOSPC."""

    WRITES = ("add_event", "set_progress", "finish_job", "update_deployment", "add_audit", "save_check")

    def __init__(self, store: Any):
        self.full = False
        for name in self.WRITES:
            setattr(store, name, self._guard(getattr(store, name)))

    def _guard(self, write: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.full:
                raise sqlite3.OperationalError("database or disk is full")
            return write(*args, **kwargs)
        return guarded


def _until(condition: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_disk_that_fills_during_a_job_ends_it_failed_with_the_reason(fake_app, fake_engine):
    client = fake_app.test_client()
    state = fake_app.extensions["raypd"]
    state.runner.retry_seconds = 0.05
    disk = DiskFull(state.store)
    create(client, "full")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/full/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(60)
    disk.full = True
    fake_engine.gate.set()  # the engine goes on and reports progress: nothing can be written

    job = wait_for_job(client, job_id)
    assert job["status"] == "failed" and "disk is full" in job["error"]
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 409  # not a silent 202
    stream = client.get(f"/api/v1/jobs/{job_id}/events?after=1000", headers=AUTH).get_data(as_text=True)
    assert '"kind":"end"' in stream and "disk is full" in stream

    disk.full = False  # space freed: the failure is written down, and the deployment is free again
    _until(lambda: state.store.get_job(job_id)["status"] == "failed")
    assert state.runner.ended(job_id) is None
    assert client.get("/api/v1/deployments/full", headers=AUTH).get_json()["status"] != "refreshing"
    assert client.post("/api/v1/deployments/full/refresh", headers=AUTH).status_code == 202
