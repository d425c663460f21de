"""A dead database or a full disk answers 503 with Retry-After and a readable reason, never 500 or a
traceback, and the app recovers by itself once the database is back or space is freed (issue 16 §2).

The full disk is real where it can be: a small tmpfs mounted for the test (root only), filled with a
file until the kernel answers ENOSPC. Where mounting is not allowed the "simulated" variant makes
the store's SQLAlchemy engine raise the real sqlite3 error SQLite gives on a full disk, "database or
disk is full" (SQLITE_FULL, sqlite3.c's sqlite3ErrStr), for every write. The dead database is a real
PostgreSQL server of this test's own, stopped and started
again on the same data (pg_ctl stop -m fast: every connection is cut).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import event

from tests.patience import PATIENCE_S, until
from tests.web import pg_server
from tests.web.support import AUTH, create, extract_csrf, login, wait_for_job

SQLITE_FULL_MESSAGE = "database or disk is full"  # what sqlite3 raises on SQLITE_FULL
WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN IMMEDIATE")


class SimulatedFullDisk:
    """Every write the store's engine sends fails as SQLite fails on a full disk; reads still work."""

    def __init__(self, home: Path):
        self.home = home
        self.full = False
        self.message = SQLITE_FULL_MESSAGE
        self.refused = 0  # writes refused so far

    def attach(self, app: Flask) -> None:
        @event.listens_for(app.extensions["raypd"].store._engine, "before_cursor_execute")
        def _refuse(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
            if self.full and statement.lstrip().upper().startswith(WRITES):
                self.refused += 1
                raise sqlite3.OperationalError(self.message)

    def fill(self) -> None:
        self.full = True

    def free(self) -> None:
        self.full = False


class TmpfsFullDisk:
    """RAYPD_HOME on a small tmpfs; `fill` writes a file until the kernel says ENOSPC."""

    SIZE = "32m"

    def __init__(self) -> None:
        self.mount_point = Path(tempfile.mkdtemp(prefix="raypd-fulldisk-"))
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.SIZE}", "tmpfs", str(self.mount_point)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            self.mount_point.rmdir()
            raise OSError(done.stderr.strip() or f"mount exited {done.returncode}")
        self.home = self.mount_point / "home"
        self.filler = self.mount_point / "filler"
        self.db_file: Optional[Path] = None

    def attach(self, app: Flask) -> None:
        self.db_file = app.extensions["raypd"].store.path

    def fill(self) -> None:
        # An empty WAL: SQLite must grow its files to write anything, as it must on a disk long full.
        assert self.db_file is not None
        with sqlite3.connect(self.db_file) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with open(self.filler, "wb") as out:
            try:
                while True:
                    out.write(b"\0" * 65536)
                    out.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
        try:  # the last, partial block
            with open(self.filler, "ab", buffering=0) as out:
                while True:
                    out.write(b"\0")
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc

    def free(self) -> None:
        self.filler.unlink()

    def remove(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount_point)], check=False)
        self.mount_point.rmdir()


@pytest.fixture(params=["tmpfs", "simulated"])
def disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "simulated":
        yield SimulatedFullDisk(tmp_path / "home")
        return
    if os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs, which only root can mount (the simulated variant runs)")
    try:
        real = TmpfsFullDisk()
    except OSError as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc}); the simulated variant runs")
    try:
        yield real
    finally:
        real.remove()


def browser(app: Flask) -> tuple[FlaskClient, str]:
    """A logged-in browser and its CSRF token."""
    client = app.test_client()
    login(client)
    return client, extract_csrf(client.get("/").get_data(as_text=True))


def assert_unavailable_json(response: Any, words: str) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert int(response.headers["Retry-After"]) > 0
    body = response.get_json()
    assert [e["field"] for e in body["errors"]] == ["store"], body
    assert words in body["errors"][0]["message"] and "no restart needed" in body["errors"][0]["message"]
    assert "Traceback" not in response.get_data(as_text=True)


def assert_unavailable_page(response: Any, words: str) -> None:
    page = response.get_data(as_text=True)
    assert response.status_code == 503, page
    assert int(response.headers["Retry-After"]) > 0
    assert response.mimetype == "text/html" and "Unavailable for now" in page and words in page
    assert "Traceback" not in page and "sqlalchemy" not in page.lower()


def assert_not_ready(anonymous: FlaskClient, words: str) -> None:
    """/readyz (no token) turns traffic away while the store is down; /healthz stays up (a restart cures nothing)."""
    ready = anonymous.get("/readyz")
    assert ready.status_code == 503 and int(ready.headers["Retry-After"]) > 0, ready.get_data(as_text=True)
    assert ready.get_json()["status"] == "unavailable" and words in ready.get_json()["reason"]
    assert anonymous.get("/healthz").status_code == 200


def test_a_full_disk_answers_503_and_the_app_works_again_as_soon_as_space_is_freed(make_app, fake_engine, disk):
    app = make_app(home=disk.home, engine=fake_engine)
    disk.attach(app)
    state = app.extensions["raypd"]
    state.runner.retry_seconds = 10 * PATIENCE_S  # nothing below may wait for the runner's own retry
    client = app.test_client()
    page, csrf = browser(app)
    create(client, "busy")
    create(client, "idle")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/busy/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)

    disk.fill()
    assert_unavailable_json(client.post("/api/v1/deployments/idle/refresh", headers=AUTH), "disk is full")
    assert_unavailable_json(
        client.post("/api/v1/deployments", json={"name": "other", "config": {}}, headers=AUTH), "disk is full")
    assert_unavailable_page(page.post("/deployments/idle/refresh", data={"csrf_token": csrf}), "disk is full")
    assert client.get("/api/v1/deployments", headers=AUTH).status_code == 200  # reads go on

    fake_engine.gate.set()  # the running job reports progress that cannot be written: it fails
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed" and "disk is full" in job["error"]

    disk.free()  # at once, not after a retry timer: the lock the failed job held is released
    again = client.post("/api/v1/deployments/busy/refresh", headers=AUTH)
    assert again.status_code == 202, again.get_json()
    assert wait_for_job(client, again.get_json()["job"])["status"] == "succeeded"
    assert state.store.get_job(job_id)["status"] == "failed"
    assert client.post("/api/v1/deployments", json={"name": "other", "config": {}},
                       headers=AUTH).status_code == 201  # nothing of the refused create was left behind
    assert page.post("/deployments/idle/refresh", data={"csrf_token": csrf}).status_code == 302


def test_a_failure_the_store_refused_is_written_down_once_it_takes_writes_again_however_long_it_took(
        make_app, fake_engine, tmp_path):
    """Nobody asks for the deployment: the runner's own retries write the failure down (they do not give up)."""
    disk = SimulatedFullDisk(tmp_path / "home")
    app = make_app(home=disk.home, engine=fake_engine)
    disk.attach(app)
    state = app.extensions["raypd"]
    state.runner.retry_seconds = 0.05
    client = app.test_client()
    create(client, "patient")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/patient/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    disk.fill()
    fake_engine.gate.set()
    until(lambda: state.runner.ended(job_id), "the job to end in memory")
    tries = disk.refused
    until(lambda: disk.refused >= tries + 5, "the runner to try recording the failure again and again")
    disk.free()
    # The retry thread writes the row, then forgets the failure it held in memory: wait for both.
    until(lambda: state.store.get_job(job_id)["status"] == "failed" and state.runner.ended(job_id) is None,
          "the failure to be written down and forgotten by the runner")


def test_a_database_mistake_is_still_a_500_not_a_503(make_app, fake_engine, tmp_path):
    """Only "unavailable for now" is a 503: a bug in a statement must not tell users to wait."""
    disk = SimulatedFullDisk(tmp_path / "home")
    disk.message = "no such table: deployments"  # also a sqlite3.OperationalError
    app = make_app(home=disk.home, engine=fake_engine)
    disk.attach(app)
    client = app.test_client()
    disk.fill()
    response = client.post("/api/v1/deployments", json={"name": "other", "config": {}}, headers=AUTH)
    assert response.status_code == 500 and "Retry-After" not in response.headers
    assert response.get_json()["errors"][0]["field"] == "server"


@pytest.fixture
def own_postgres() -> Iterator[tuple[pg_server.PostgresServer, str]]:
    """A PostgreSQL server for this test alone (it is stopped and started again) and a database on it."""
    if os.environ.get("RAYPD_TEST_DATABASE_URL"):
        pytest.skip("stopping the database server needs one of the tests' own, not RAYPD_TEST_DATABASE_URL's")
    try:
        server = pg_server.PostgresServer()
        server.start()
    except pg_server.PostgresUnavailable as exc:
        pg_server.unavailable(exc)
    try:
        yield server, pg_server.Databases(server.admin_url).create()
    finally:
        server.stop()


def test_a_stopped_postgresql_answers_503_and_the_app_recovers_when_it_is_back(make_app, fake_engine, own_postgres):
    server, url = own_postgres
    app = make_app(engine=fake_engine, RAYPD_DATABASE_URL=url)
    app.extensions["raypd"].runner.retry_seconds = 10 * PATIENCE_S  # recovery may not wait for the retry timer
    client = app.test_client()
    page, csrf = browser(app)
    create(client, "team")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/team/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)

    server.halt()
    assert_not_ready(app.test_client(), "not reachable")
    assert_unavailable_json(client.get("/api/v1/deployments", headers=AUTH), "not reachable")
    assert_unavailable_json(client.post("/api/v1/deployments", json={"name": "b", "config": {}}, headers=AUTH),
                            "not reachable")
    assert_unavailable_json(client.get(f"/api/v1/jobs/{job_id}", headers=AUTH), "not reachable")
    assert_unavailable_page(page.get("/"), "not reachable")
    assert_unavailable_page(page.get("/deployments/team"), "not reachable")
    fake_engine.gate.set()  # the job goes on while nothing can be written: it must end failed, not stay running
    until(lambda: app.extensions["raypd"].runner.ended(job_id), "the job to end in memory")

    server.resume()  # no restart of the app: the pool drops its dead connections
    until(lambda: client.get("/api/v1/deployments", headers=AUTH).status_code == 200, "the API to answer again")
    assert app.test_client().get("/readyz").status_code == 200
    assert page.get("/").status_code == 200
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed" and "job store" in job["error"]
    again = client.post("/api/v1/deployments/team/refresh", headers=AUTH)
    assert again.status_code == 202, again.get_json()
    assert wait_for_job(client, again.get_json()["job"])["status"] == "succeeded"
    assert app.extensions["raypd"].store.get_job(job_id)["status"] == "failed"
    assert page.post("/deployments/team/refresh", data={"csrf_token": csrf}).status_code == 302


# ---- POST /deployments/<unknown>/benchmark with an invalid form ----

BAD_FORM = {"rates": "1", "requests": "many"}


def test_an_invalid_benchmark_form_for_an_unknown_deployment_is_a_404_page(make_app):
    page, csrf = browser(make_app())
    response = page.post("/deployments/nowhere/benchmark", data={"csrf_token": csrf, **BAD_FORM})
    text = response.get_data(as_text=True)
    assert response.status_code == 404, text
    assert "nowhere" in text and "Traceback" not in text


def test_an_invalid_benchmark_body_for_an_unknown_deployment_names_the_field_or_the_deployment(make_app):
    client = make_app().test_client()
    response = client.post("/api/v1/deployments/nowhere/benchmarks", json={"rates": [1], "requests": "many"},
                           headers=AUTH)
    # As every API route: the body is checked first (400 naming the field), then the deployment.
    assert response.status_code == 400
    assert [e["field"] for e in response.get_json()["errors"]] == ["requests"]
    valid = client.post("/api/v1/deployments/nowhere/benchmarks", json={"rates": [1]}, headers=AUTH)
    assert valid.status_code == 404 and valid.get_json()["errors"][0]["field"] == "name"
