"""A store that stops taking writes mid-job (a full disk) ends the job as failed, never stuck."""

from __future__ import annotations

import sqlite3
from typing import Any, Callable

from tests.patience import PATIENCE_S, until
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


def test_a_disk_that_fills_during_a_job_ends_it_failed_with_the_reason(fake_app, fake_engine):
    client = fake_app.test_client()
    state = fake_app.extensions["raypd"]
    state.runner.retry_seconds = 0.05
    disk = DiskFull(state.store)
    create(client, "full")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/full/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    disk.full = True
    fake_engine.gate.set()  # the engine goes on and reports progress: nothing can be written

    job = wait_for_job(client, job_id)
    assert job["status"] == "failed" and "disk is full" in job["error"]
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 409  # not a silent 202
    stream = client.get(f"/api/v1/jobs/{job_id}/events?after=1000", headers=AUTH).get_data(as_text=True)
    assert '"kind":"end"' in stream and "disk is full" in stream

    disk.full = False  # space freed: the failure is written down, and the deployment is free again
    # The retry thread writes the row, then forgets the failure it held in memory: wait for both.
    until(lambda: state.store.get_job(job_id)["status"] == "failed" and state.runner.ended(job_id) is None,
          "the job's failure to be written down and forgotten by the runner")
    assert client.get("/api/v1/deployments/full", headers=AUTH).get_json()["status"] != "refreshing"
    assert client.post("/api/v1/deployments/full/refresh", headers=AUTH).status_code == 202
