"""Fixtures for the web app tests: apps on a temp RAYPD_HOME, clients, a fake engine (tests/web/support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web import pg_server
from tests.web.support import FakeEngine, settings_for
from webui import close_app, create_app
from webui.engines.offline import OfflineEngine
from webui.engines.select import EngineSet
from webui.store import Store


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[Callable[..., Flask]]:
    apps: list[Flask] = []

    def build(home: Optional[Path] = None, engine: Optional[Any] = None, **env: str) -> Flask:
        settings = settings_for(home or tmp_path / "home", **env)
        engines = None
        if engine is not None:
            engines = EngineSet(engine, {engine.name: engine, "offline": OfflineEngine(settings)})
        app = create_app(settings, engines=engines)
        app.config["TESTING"] = True
        apps.append(app)
        return app

    yield build
    for app in apps:
        close_app(app)


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def fake_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def fake_app(make_app: Callable[..., Flask], fake_engine: FakeEngine) -> Flask:
    return make_app(engine=fake_engine)


# ---- the job store on both dialects: SQLite (embedded) and a real PostgreSQL server (team mode) ----

@pytest.fixture(scope="session")
def postgres() -> Iterator[pg_server.Databases]:
    """One PostgreSQL server for the session (where none can start, its tests fail saying why)."""
    try:
        server, databases = pg_server.start()
    except (pg_server.PostgresUnavailable, ImportError) as exc:
        pg_server.unavailable(exc)
    try:
        yield databases
    finally:
        if server is not None:
            server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Union[Path, str]]:
    """Where a test's store lives: a SQLite file, or a fresh database on the session's server."""
    if request.param == "sqlite":
        yield tmp_path / "raypd.db"
        return
    databases: pg_server.Databases = request.getfixturevalue("postgres")
    url = databases.create()
    try:
        yield url
    finally:
        databases.drop(url)


@pytest.fixture
def make_store(store_url: Union[Path, str]) -> Iterator[Callable[[], Store]]:
    """Stores on the test's location (call twice for two servers sharing it); closed at the end."""
    stores: list[Store] = []

    def build() -> Store:
        store = Store(store_url)
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()
