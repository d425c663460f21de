"""Schema versions: a store written before migrations existed is upgraded in place, data kept;
the migrations and the tables the code queries agree on both dialects; a newer store is refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from webui import db
from webui.jobs import JobRunner
from webui.store import Store, StoreError

# Version 1: webui/store.py's `_SCHEMA` as raypd wrote it before migrations (frozen copy: never edit).
VERSION_1 = """
CREATE TABLE IF NOT EXISTS deployments (
    name TEXT PRIMARY KEY,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL,
    summary TEXT NOT NULL,
    outputs TEXT,
    resources TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_operation TEXT,
    last_operation_at REAL,
    last_result TEXT,
    last_job TEXT
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    deployment TEXT NOT NULL,
    operation TEXT NOT NULL,
    engine TEXT NOT NULL,
    status TEXT NOT NULL,
    previous_status TEXT,
    done INTEGER NOT NULL DEFAULT 0,
    total INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    hint TEXT,
    actor TEXT,
    summary TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_by_deployment ON jobs (deployment, created_at);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status);
-- The per-deployment lock lives in the store, not in a process: two servers on one store (a lock
-- file removed by hand) still cannot run two jobs on one deployment.
CREATE UNIQUE INDEX IF NOT EXISTS one_active_job_per_deployment ON jobs (deployment)
    WHERE status IN ('queued', 'running');
CREATE TABLE IF NOT EXISTS events (
    job TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (job, seq)
);
CREATE TABLE IF NOT EXISTS checks (
    deployment TEXT NOT NULL,
    kind TEXT NOT NULL,
    job TEXT,
    time REAL NOT NULL,
    report TEXT NOT NULL,
    PRIMARY KEY (deployment, kind)
);
CREATE TABLE IF NOT EXISTS deployed_configs (
    deployment TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    ended REAL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    result TEXT NOT NULL,
    detail TEXT
);
"""


def write_version_1(path: Path) -> None:
    """A raypd.db as the code before migrations left it: a deployed stack, a finished up, a refresh
    still running when that server stopped, its events, a check report and audit lines."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(VERSION_1)
    conn.execute(
        "INSERT INTO deployments VALUES ('legacy', 'pulumi', 'refreshing', ?, ?, ?, NULL, 100.0, 200.0,"
        " 'refresh', 200.0, 'running', 'job-running')",
        (json.dumps({"raypd:region": "us-west-2"}), json.dumps({"gpus": 16}), json.dumps({"modelId": "m"})),
    )
    conn.executemany(
        "INSERT INTO jobs (id, deployment, operation, engine, status, previous_status, done, total, actor,"
        " created_at, started_at, finished_at) VALUES (?, 'legacy', ?, 'pulumi', ?, 'deployed', ?, ?, 'me', ?, ?, ?)",
        [("job-done", "up", "succeeded", 34, 34, 110.0, 111.0, 150.0),
         ("job-running", "refresh", "running", 2, 34, 200.0, 201.0, None)],
    )
    conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", [
        ("job-done", 1, 111.0, json.dumps({"kind": "status", "status": "running"})),
        ("job-done", 2, 150.0, json.dumps({"kind": "end", "status": "succeeded"})),
        ("job-running", 1, 201.0, json.dumps({"kind": "status", "status": "running"})),
    ])
    conn.execute("INSERT INTO checks VALUES ('legacy', 'verify', 'job-done', 151.0, ?)",
                 (json.dumps({"kind": "verify", "checks": []}),))
    conn.execute("INSERT INTO deployed_configs VALUES ('legacy', ?, 150.0)", (json.dumps({"v": 1}),))
    conn.executemany("INSERT INTO audit (time, actor, action, target, result) VALUES (?, 'me', ?, 'legacy', ?)",
                     [(100.0, "create", "succeeded"), (150.0, "up", "succeeded")])
    conn.commit()
    conn.close()


def test_a_store_written_before_migrations_keeps_its_data(tmp_path: Path):
    path = tmp_path / "raypd.db"
    write_version_1(path)
    store = Store(path)
    try:
        assert store.schema_version == "0007"
        record = store.get_deployment("legacy")
        assert record["config"] == {"raypd:region": "us-west-2"} and record["outputs"] == {"modelId": "m"}
        assert record["summary"] == {"gpus": 16} and record["lastJob"] == "job-running"
        assert store.get_job("job-done")["progress"] == {"done": 34, "total": 34}
        assert [e["seq"] for e in store.events_after("job-done")] == [1, 2]
        assert store.last_checks("legacy")["verify"]["job"] == "job-done"
        assert store.deployed_config("legacy") == {"v": 1}
        assert [e["action"] for e in store.audit_entries()] == ["up", "create"]
        # The old lock still holds, and the restart marks the old server's job interrupted.
        assert store.active_job("legacy") == "job-running"
        runner = JobRunner(store)
        assert [job["id"] for job in runner.recover()] == ["job-running"]
        runner.shutdown(wait=True)
        assert store.get_job("job-running")["status"] == "interrupted"
        assert store.events_after("job-running")[-1]["kind"] == "end"
        assert store.audit_entries()[0]["id"] == 3  # ids go on from the old ones
    finally:
        store.close()
    again = Store(path)  # opening an up-to-date store changes nothing
    try:
        assert again.schema_version == "0007" and again.get_job("job-done")["status"] == "succeeded"
    finally:
        again.close()


def test_an_empty_store_is_built_by_the_migrations_and_matches_the_code(make_store):
    store = make_store()
    assert store.schema_version == "0007"
    with store._engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": False})
        differences = compare_metadata(context, db.metadata)
    assert differences == []


def test_a_store_from_a_newer_raypd_is_refused_not_touched(tmp_path: Path):
    path = tmp_path / "raypd.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as refused:
        Store(path)
    assert "version 9999" in str(refused.value) and "newer raypd" in str(refused.value)


def test_an_upgrade_is_said_in_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = tmp_path / "raypd.db"
    engine = db.make_engine(db.parse_url(path))
    db.upgrade(engine, "0002")  # a store a raypd before benchmarks wrote
    engine.dispose()
    with caplog.at_level("INFO", logger="webui.db"):
        Store(path).close()
        Store(path).close()  # already current: nothing to say
    said = [r.getMessage() for r in caplog.records if r.name == "webui.db"]
    assert said == ["job store schema upgraded from version 0002 to 0007"]


def test_a_store_at_0005_gains_resilience_runs_and_keeps_its_benchmarks(tmp_path: Path):
    """Version 6 (issue 31 §2) upgrades the previous head in place: benchmark runs stay, and the
    Resilience tab's reports can be stored and read back, newest first."""
    path = tmp_path / "raypd.db"
    engine = db.make_engine(db.parse_url(path))
    db.upgrade(engine, "0005")
    with engine.begin() as conn:
        conn.execute(db.benchmark_runs.insert().values(
            id="b1", deployment="live", label="live #b1", created_at=1.0, actor="me", settings="{}",
            summary="{}", records=b""))
    engine.dispose()
    store = Store(path)
    try:
        assert store.schema_version == "0007"
        assert [run["id"] for run in store.benchmark_runs("live")] == ["b1"]
        assert store.resilience_runs("live") == []
        store.save_resilience("r1", "live", "me", {"fault": "node"}, {"kind": "resilience", "ok": True})
        store.save_resilience("r2", "live", "me", {"fault": "head-pod"}, {"kind": "resilience", "ok": False})
        assert [run["id"] for run in store.resilience_runs("live")] == ["r2", "r1"]
        assert store.resilience_run("r1")["settings"] == {"fault": "node"}
    finally:
        store.close()
