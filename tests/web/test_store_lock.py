"""The one-job-per-deployment lock lives in the store: two servers on one store cannot both run.

Both dialects: two Store+JobRunner pairs on one SQLite file (a lock file removed by hand) or on one
PostgreSQL database (team mode, where this is the normal case).
"""

from __future__ import annotations

import threading
import time
from typing import Optional

import pytest

from tests.patience import PATIENCE_S, until
from webui.engines.base import JobContext, OperationCancelled, OperationResult
from webui.jobs import Busy, JobRunner
from webui.store import JobActive


def test_two_stores_on_one_file_cannot_queue_two_jobs_for_one_deployment(make_store):
    first, second = make_store(), make_store()
    first.create_deployment("demo", "offline", {}, {})
    job = first.create_job("demo", "up", "offline", "a", "updating")
    with pytest.raises(JobActive) as taken:
        second.create_job("demo", "refresh", "offline", "b", "refreshing")
    assert taken.value.job_id == job
    assert first.set_job_running(job)
    assert first.finish_job(job, "succeeded")
    assert second.create_job("demo", "refresh", "offline", "b", "refreshing")


def test_a_settings_change_is_refused_while_a_job_of_any_server_is_active_and_writes_nothing(make_store):
    first, second = make_store(), make_store()
    first.create_deployment("demo", "offline", {"raypd:decode": {"replicas": 1}}, {})
    first.save_stack_file("demo", "replicas: 1")
    job = first.create_job("demo", "up", "offline", "a", "updating")
    with second.staged_stack_file("demo") as staged:  # what an engine's configure writes, held back
        second.save_stack_file("demo", "replicas: 2")
        assert second.stack_file("demo") == "replicas: 2"  # this thread reads what it staged ...
        elsewhere: list[Optional[str]] = []
        reader = threading.Thread(target=lambda: elsewhere.append(second.stack_file("demo")))
        reader.start()
        reader.join(PATIENCE_S)
        assert elsewhere == ["replicas: 1"]  # ... no other thread does
    assert first.stack_file("demo") == "replicas: 1"
    with pytest.raises(JobActive) as taken:
        second.set_config("demo", {"raypd:decode": {"replicas": 2}}, {}, stack_file=staged.text)
    assert taken.value.job_id == job
    assert first.get_deployment("demo")["config"] == {"raypd:decode": {"replicas": 1}}
    assert first.stack_file("demo") == "replicas: 1"
    assert first.set_job_running(job) and first.finish_job(job, "succeeded")
    second.set_config("demo", {"raypd:decode": {"replicas": 2}}, {}, stack_file=staged.text)
    assert first.get_deployment("demo")["config"] == {"raypd:decode": {"replicas": 2}}
    assert first.stack_file("demo") == "replicas: 2"  # with the config, in one transaction


def test_racing_runners_of_two_servers_start_exactly_one_job(make_store):
    stores = [make_store() for _ in range(2)]
    stores[0].create_deployment("race", "offline", {}, {})
    runners = [JobRunner(store) for store in stores]
    for runner in runners:
        runner.recover()  # both servers up: neither may take the other's jobs for orphans
    release = threading.Event()
    started: list[str] = []
    refused: list[str] = []
    barrier = threading.Barrier(8)

    def work(ctx: JobContext) -> OperationResult:
        release.wait(PATIENCE_S)
        return OperationResult()

    def attempt(runner: JobRunner) -> None:
        barrier.wait(PATIENCE_S)
        try:
            started.append(runner.submit("race", "up", "offline", "t", "updating", work, lambda *a: None))
        except Busy as busy:
            refused.append(busy.job_id)

    threads = [threading.Thread(target=attempt, args=(runners[i % 2],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE_S)
    release.set()
    for runner in runners:
        runner.shutdown(wait=True)
    assert len(started) == 1 and len(refused) == 7
    assert set(refused) == set(started)
    assert stores[1].get_job(started[0])["status"] == "succeeded"


def test_a_server_starting_in_team_mode_leaves_a_live_peers_job_alone(make_store):
    first, second = make_store(), make_store()
    first.create_deployment("shared", "offline", {}, {})
    busy = JobRunner(first, heartbeat_seconds=0.05)
    busy.recover()
    release, started = threading.Event(), threading.Event()

    def work(ctx: JobContext) -> OperationResult:
        started.set()
        release.wait(PATIENCE_S)
        return OperationResult()

    job_id = busy.submit("shared", "up", "offline", "t", "updating", work, lambda *a: None)
    assert started.wait(PATIENCE_S)
    peer = JobRunner(second, heartbeat_seconds=0.05)
    try:
        interrupted = peer.recover()
        if second.shared:  # team mode: the first server is alive, its job goes on
            assert interrupted == []
            assert second.get_job(job_id)["status"] == "running"
        else:  # embedded: one server per RAYPD_HOME, so a new one means the old one is gone
            assert [job["id"] for job in interrupted] == [job_id]
    finally:
        release.set()
        busy.shutdown(wait=True)
        peer.shutdown(wait=True)
    assert second.get_job(job_id)["status"] in (("succeeded",) if second.shared else ("interrupted",))


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # team mode only
def test_in_team_mode_the_jobs_of_a_server_that_vanished_are_interrupted_by_a_peer(make_store):
    first, second = make_store(), make_store()
    assert first.shared
    first.create_deployment("orphan", "offline", {}, {})
    first.register_instance()
    job_id = first.create_job("orphan", "up", "offline", "t", "updating")
    assert first.set_job_running(job_id)
    # The first server crashes: no heartbeat, no shutdown. Its peer notices once it is stale (5 s
    # after it registered: well after the peer's start-up, however slowly these few writes go).
    peer = JobRunner(second, heartbeat_seconds=0.05, stale_seconds=5.0)
    try:
        assert peer.recover() == []
        until(lambda: second.get_job(job_id)["status"] == "interrupted", "the peer to interrupt the job")
    finally:
        peer.shutdown(wait=True)
    assert second.get_job(job_id)["status"] == "interrupted"
    end = second.events_after(job_id)[-1]
    assert end["kind"] == "end" and end["status"] == "interrupted"
    assert second.active_job("orphan") is None  # the deployment is free for a new job


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # team mode only
def test_in_team_mode_a_cancel_sent_to_another_server_stops_the_job(make_store):
    first, second = make_store(), make_store()
    first.create_deployment("far", "offline", {}, {})
    owner = JobRunner(first, cancel_poll_seconds=0.05)
    other = JobRunner(second, cancel_poll_seconds=0.05)
    owner.recover()
    other.recover()
    started = threading.Event()

    def work(ctx: JobContext) -> OperationResult:
        started.set()
        deadline = time.monotonic() + PATIENCE_S
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        if ctx.cancelled:
            raise OperationCancelled()
        return OperationResult()

    try:
        job_id = owner.submit("far", "up", "offline", "t", "updating", work, lambda *a: None)
        assert started.wait(PATIENCE_S)
        other.cancel(job_id, "bob", release=lambda: None)
        until(lambda: second.get_job(job_id)["status"] != "running", "the job to stop")
    finally:
        owner.shutdown(wait=True)
        other.shutdown(wait=True)
    assert second.get_job(job_id)["status"] == "cancelled"
    messages = [e.get("message") for e in second.events_after(job_id)]
    assert "cancel requested by bob" in messages and messages[-1] == "up cancelled: cancelled on request"


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # team mode only
def test_two_app_servers_on_one_database_start_exactly_one_job(make_app, store_url, tmp_path):
    from tests.web.support import AUTH, FakeEngine, create, wait_for_job

    engines = [FakeEngine(), FakeEngine()]
    apps = [make_app(home=tmp_path / f"server-{n}", engine=engine, RAYPD_DATABASE_URL=store_url)
            for n, engine in enumerate(engines)]
    assert apps[0].extensions["raypd"].store.shared  # both apps on the one PostgreSQL store
    clients = [app.test_client() for app in apps]
    create(clients[0], "team")
    assert clients[1].get("/api/v1/deployments/team", headers=AUTH).status_code == 200  # one list
    for engine in engines:
        engine.gate.clear()
    barrier = threading.Barrier(6)
    answers: list[int] = []

    def attempt(n: int) -> None:
        client = apps[n % 2].test_client()
        barrier.wait(PATIENCE_S)
        answers.append(client.post("/api/v1/deployments/team/up", headers=AUTH).status_code)

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE_S)
    assert sorted(answers) == [202, 409, 409, 409, 409, 409]
    for engine in engines:
        engine.gate.set()
    job = clients[1].get("/api/v1/deployments/team", headers=AUTH).get_json()["jobs"][0]
    assert wait_for_job(clients[0], job["id"])["status"] == "succeeded"
