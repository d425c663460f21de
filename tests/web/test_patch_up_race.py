"""A PATCH racing an `up` (issue 29 §3): `up` read the config, then took the job lock; a PATCH
landing between the two was what the engine deployed while the OLD config was recorded as
deployed (10 of 40 rounds with the PATCH 0-8 ms before the up). Now an up reads the config in the
database transaction that inserts its job, under a lock on the deployment's row, and a change writes
the config and the stack's settings file in one transaction under the same lock, refusing while a
job is active: a change either lands before the job (deployed AND recorded) or gets 409 and changes
nothing. That holds across team-mode servers too, whose in-process locks know nothing of each other.

The windows are opened deterministically, by hooks, never by sleeps; the engine keeps each stack's
config where the real engines do (the store's stack settings files, shared by every server) and
reads it only when the test lets the up run, after the PATCH has answered."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Union

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event

from tests.patience import PATIENCE_S, until
from tests.web.support import AUTH, StoredStackEngine, wait_for_job
from webui.store import Store

GROWN = {"config": {"raypd:decode": {"replicas": 3}}}


def _replicas(config: dict[str, Any]) -> int:
    return int(config["raypd:decode"]["replicas"])


def _detail(client: FlaskClient, name: str) -> dict[str, Any]:
    return client.get(f"/api/v1/deployments/{name}", headers=AUTH).get_json()


def _patch(client: FlaskClient, name: str) -> Any:
    return client.patch(f"/api/v1/deployments/{name}", headers=AUTH, json=GROWN)


# ---- one server ----

def test_a_patch_just_before_an_up_is_deployed_and_recorded_as_deployed(make_app, monkeypatch):
    engine = StoredStackEngine()
    app = make_app(engine=engine)
    client = app.test_client()
    assert client.post("/api/v1/deployments", headers=AUTH, json={"name": "race", "config": {}}).status_code == 201
    service = app.extensions["raypd"].service
    patched: list[int] = []
    submit = service.submit

    def patch_first(*args: Any, **kwargs: Any) -> str:
        if not patched:  # the PATCH lands after `up` was asked for, before its job takes the lock
            patched.append(_patch(client, "race").status_code)
        return submit(*args, **kwargs)

    monkeypatch.setattr(service, "submit", patch_first)
    job = wait_for_job(client, client.post("/api/v1/deployments/race/up", headers=AUTH).get_json()["job"])
    assert patched == [200] and job["status"] == "succeeded", job
    assert _replicas(engine.ran_with[-1]) == 3
    detail = _detail(client, "race")
    assert _replicas(detail["deployed"]["spec"]) == 3  # what ran is what is recorded
    assert detail["pending"] is None


def test_a_patch_once_the_up_has_started_is_refused(make_app):
    engine = StoredStackEngine()
    engine.gate.clear()
    app = make_app(engine=engine)
    client = app.test_client()
    assert client.post("/api/v1/deployments", headers=AUTH, json={"name": "busy", "config": {}}).status_code == 201
    job_id = client.post("/api/v1/deployments/busy/up", headers=AUTH).get_json()["job"]
    refused = _patch(client, "busy")
    assert refused.status_code == 409
    engine.gate.set()
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    assert _replicas(engine.ran_with[-1]) == 1
    detail = _detail(client, "busy")
    assert _replicas(detail["deployed"]["spec"]) == 1 and detail["pending"] is None


# ---- two servers on one database (team mode; and two stores on one SQLite file) ----

@dataclass
class Server:
    app: Flask
    client: FlaskClient
    engine: StoredStackEngine
    store: Store


@pytest.fixture
def two_servers(store_url: Union[Path, str], make_app: Callable[..., Flask],
                tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """Servers A and B on the test's database: one PostgreSQL database (team mode), or one SQLite
    file (two servers on one RAYPD_HOME). `store_url` first: the apps close before it goes."""

    def start(n: int) -> Server:
        engine = StoredStackEngine()
        if isinstance(store_url, Path):
            app = make_app(home=store_url.parent, engine=engine)
        else:
            app = make_app(home=tmp_path / f"server-{n}", engine=engine, RAYPD_DATABASE_URL=store_url)
        store = app.extensions["raypd"].store
        assert store.location == str(store_url) or store.shared
        return Server(app, app.test_client(), engine, store)

    a, b = start(0), start(1)
    assert a.client.post("/api/v1/deployments", headers=AUTH, json={"name": "race", "config": {}}).status_code == 201
    assert _detail(b.client, "race")["name"] == "race"  # one list
    yield a, b
    a.engine.may_read.set()  # a test that failed early must not leave an up waiting for it


def _up_ran_what_is_recorded(a: Server, job_id: str, replicas: int) -> None:
    """Let A's up read the stack's file and run; it deployed `replicas`, and the store says so."""
    a.engine.may_read.set()
    assert wait_for_job(a.client, job_id)["status"] == "succeeded"
    assert [_replicas(config) for config in a.engine.ran_with] == [replicas]
    detail = _detail(a.client, "race")
    assert _replicas(detail["deployed"]["spec"]) == replicas  # what ran is what is recorded
    assert _replicas(detail["spec"]) == replicas and detail["pending"] is None


def test_a_patch_on_another_server_just_before_an_up_starts_its_job_is_deployed_and_recorded(
        two_servers, monkeypatch):
    a, b = two_servers
    a.engine.may_read.clear()
    patched: list[int] = []
    create_job = a.store.create_job

    def patch_first(*args: Any, **kwargs: Any) -> str:
        if not patched:  # where the old code had read the config, before the job's transaction
            patched.append(_patch(b.client, "race").status_code)
        return create_job(*args, **kwargs)

    monkeypatch.setattr(a.store, "create_job", patch_first)
    answer = a.client.post("/api/v1/deployments/race/up", headers=AUTH)
    assert answer.status_code == 202 and patched == [200]
    _up_ran_what_is_recorded(a, answer.get_json()["job"], replicas=3)


def test_an_up_on_another_server_starting_while_a_patch_is_written_refuses_the_patch(two_servers, monkeypatch):
    a, b = two_servers
    a.engine.may_read.clear()
    ups: list[Any] = []
    configure = b.engine.configure

    def up_meanwhile(*args: Any, **kwargs: Any) -> None:
        # B found the deployment idle and writes the stack's settings: A starts an up right now.
        ups.append(a.client.post("/api/v1/deployments/race/up", headers=AUTH))
        configure(*args, **kwargs)

    monkeypatch.setattr(b.engine, "configure", up_meanwhile)
    refused = _patch(b.client, "race")
    [up] = ups
    assert up.status_code == 202
    assert refused.status_code == 409, refused.get_json()
    assert refused.get_json()["job"] == up.get_json()["job"]
    assert _replicas(b.store.get_deployment("race")["config"]) == 1  # nothing of the change was written
    _up_ran_what_is_recorded(a, up.get_json()["job"], replicas=1)


def test_a_patch_on_another_server_meeting_an_up_inside_its_job_transaction_waits_and_is_refused(
        two_servers, monkeypatch):
    """The up has read the config in its job's transaction and not yet inserted the job; B's
    PATCH, from B's idle check on, runs now: the database holds its write until A's transaction
    ends, and then it finds A's job."""
    a, b = two_servers
    a.engine.may_read.clear()
    writing, hooked = threading.Event(), threading.Event()
    answers: list[Any] = []
    write = b.store._write

    def noted_write() -> Any:
        writing.set()  # B is about to write: from here it cannot overtake A's open transaction
        return write()

    monkeypatch.setattr(b.store, "_write", noted_write)

    def patch_on_b() -> None:
        answers.append(_patch(b.app.test_client(), "race"))

    patcher = threading.Thread(target=patch_on_b)

    def before_insert(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if hooked.is_set() or not statement.lstrip().upper().startswith("INSERT INTO JOBS"):
            return
        hooked.set()
        patcher.start()
        until(lambda: writing.is_set() or not patcher.is_alive(), "B's PATCH to write or end")

    event.listen(a.store._engine, "before_cursor_execute", before_insert)
    try:
        up = a.client.post("/api/v1/deployments/race/up", headers=AUTH)
    finally:
        event.remove(a.store._engine, "before_cursor_execute", before_insert)
    patcher.join(PATIENCE_S)
    assert hooked.is_set() and up.status_code == 202
    [refused] = answers
    assert refused.status_code == 409, refused.get_json()
    assert refused.get_json()["job"] == up.get_json()["job"]
    _up_ran_what_is_recorded(a, up.get_json()["job"], replicas=1)


def test_a_discard_on_another_server_while_an_up_starts_there_is_refused_as_a_patch_is(two_servers, monkeypatch):
    a, b = two_servers
    first = a.client.post("/api/v1/deployments/race/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(a.client, first)["status"] == "succeeded"
    assert _patch(a.client, "race").status_code == 200  # pending: 3 replicas, deployed: 1
    a.engine.ran_with.clear()
    a.engine.may_read.clear()
    ups: list[Any] = []
    configure = b.engine.configure

    def up_meanwhile(*args: Any, **kwargs: Any) -> None:
        ups.append(a.client.post("/api/v1/deployments/race/up", headers=AUTH))
        configure(*args, **kwargs)

    monkeypatch.setattr(b.engine, "configure", up_meanwhile)
    refused = b.client.delete("/api/v1/deployments/race/pending-config", headers=AUTH)
    [up] = ups
    assert up.status_code == 202 and refused.status_code == 409, refused.get_json()
    assert refused.get_json()["job"] == up.get_json()["job"]
    _up_ran_what_is_recorded(a, up.get_json()["job"], replicas=3)  # the pending change, deployed
