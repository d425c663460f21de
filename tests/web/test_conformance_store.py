"""Conformance runs in the store, on SQLite and PostgreSQL: the newest report per deployment, a
credential-shaped value masked; and migration 0007 upgrades a store at 0006 in place, data kept."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import insert

from webui import db
from webui.store import Store

KEY = "rpd_" + "St0reKey" * 4


def test_the_newest_run_is_the_last_and_a_key_is_never_stored(make_store):
    store = make_store()
    assert store.last_conformance("live") is None
    store.save_conformance("job-1", "live", None, "me", {"schemaVersion": 1, "features": [], "counts": {}})
    store.save_conformance("job-2", "live", "colo", "you", {
        "schemaVersion": 1, "counts": {"fail": 1},
        "features": [{"id": "chat.basic", "verdict": "fail", "evidence": f"said Bearer {KEY}", "data": {}}]})
    store.save_conformance("job-3", "other", None, "me", {"schemaVersion": 1, "features": [], "counts": {}})
    last = store.last_conformance("live")
    assert last is not None and last["id"] == "job-2" and last["reference"] == "colo" and last["actor"] == "you"
    assert last["report"]["features"][0]["id"] == "chat.basic" and KEY not in json.dumps(last)
    assert make_store().last_conformance("other")["id"] == "job-3"  # a second server sharing the store


def test_a_store_at_version_6_is_upgraded_and_keeps_its_data(tmp_path: Path):
    path = tmp_path / "raypd.db"
    engine = db.make_engine(db.parse_url(path))
    db.upgrade(engine, "0006")  # what the raypd before conformance runs wrote, with a deployment in it
    with engine.begin() as conn:
        conn.execute(insert(db.deployments).values(
            name="legacy", engine="pulumi", status="deployed", config="{}", summary='{"gpus": 2}',
            created_at=1.0, updated_at=1.0))
    assert db.current_revision(engine) == "0006"
    engine.dispose()
    store = Store(path)
    try:
        assert store.schema_version == "0007"
        assert store.get_deployment("legacy")["summary"] == {"gpus": 2}
        store.save_conformance("job-1", "legacy", None, None, {"schemaVersion": 1})
        assert store.last_conformance("legacy")["report"] == {"schemaVersion": 1}
    finally:
        store.close()
