"""The one-job-per-deployment lock lives in the store: two servers on one store cannot both run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from webui.jobs import Busy, JobRunner
from webui.store import JobActive, Store


def test_two_stores_on_one_file_cannot_queue_two_jobs_for_one_deployment(tmp_path: Path):
    first, second = Store(tmp_path / "raypd.db"), Store(tmp_path / "raypd.db")
    first.create_deployment("demo", "offline", {}, {})
    job = first.create_job("demo", "up", "offline", "a", "updating")
    with pytest.raises(JobActive) as taken:
        second.create_job("demo", "refresh", "offline", "b", "refreshing")
    assert taken.value.job_id == job
    first.finish_job(job, "succeeded")
    assert second.create_job("demo", "refresh", "offline", "b", "refreshing")


def test_racing_runners_of_two_servers_start_exactly_one_job(tmp_path: Path):
    stores = [Store(tmp_path / "raypd.db") for _ in range(2)]
    stores[0].create_deployment("race", "offline", {}, {})
    runners = [JobRunner(store) for store in stores]
    release = threading.Event()
    started: list[str] = []
    refused: list[str] = []
    barrier = threading.Barrier(8)

    def work(ctx):
        release.wait(10)
        from webui.engines.base import OperationResult
        return OperationResult()

    def attempt(runner: JobRunner) -> None:
        barrier.wait(10)
        try:
            started.append(runner.submit("race", "up", "offline", "t", "updating", work, lambda *a: None))
        except Busy as busy:
            refused.append(busy.job_id)

    threads = [threading.Thread(target=attempt, args=(runners[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    release.set()
    for runner in runners:
        runner.shutdown(wait=True)
    assert len(started) == 1 and len(refused) == 7
    assert set(refused) == set(started)
