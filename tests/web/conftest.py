"""Fixtures for the web app tests: apps on a temp RAYPD_HOME, clients, a fake engine (tests/web/support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.web.support import FakeEngine, settings_for
from webui import close_app, create_app
from webui.engines.offline import OfflineEngine
from webui.engines.select import EngineSet


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
