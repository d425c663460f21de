"""What is deployed, kept in the store apart from the stack's config, on both dialects (SQLite and
a real PostgreSQL): the deployed record, the token flag, the list's view of both, a version-3
store upgraded in place, and completing records an older raypd left."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Union

import pytest
from sqlalchemy import insert, select, update

from webui import db
from webui.store import Store

CONFIG = {"aws:region": "us-east-2", "raypd:decode": {"replicas": 1}, "raypd:hfToken": "[secret]"}
SUMMARY = {"topology": "decode: 1 replica", "usdPerHour": 4.0}
PLAN = {"stack": "demo", "resources": [{"type": "aws:ec2/vpc:Vpc", "name": "vpc", "inputs": {}}], "outputs": {}}


@pytest.fixture
def store(make_store) -> Store:
    store = make_store()
    store.create_deployment("demo", "offline", CONFIG, SUMMARY)
    return store


def test_nothing_is_deployed_until_an_up_records_it(store):
    assert store.deployed("demo") is None and store.deployed_config("demo") is None
    [row] = store.list_deployments()
    assert row["deployed"] is None and row["summary"] == SUMMARY


def test_an_up_records_its_status_and_what_it_deployed_in_one_go(store):
    job = store.create_job("demo", "up", "offline", "t", "updating")
    store.record_deployed("demo", {"status": "planned (offline)", "outputs": {"modelId": "m"}},
                          CONFIG, SUMMARY, plan=PLAN, job=job)
    deployed = store.deployed("demo")
    assert deployed is not None
    assert (deployed["config"], deployed["summary"], deployed["plan"], deployed["job"]) == (CONFIG, SUMMARY, PLAN, job)
    assert deployed["tokenReplaced"] is False and deployed["time"] > 0
    assert store.get_deployment("demo")["status"] == "planned (offline)"
    [row] = store.list_deployments()
    assert row["summary"] == SUMMARY and row["deployed"]["configDiffers"] is False


def test_a_changed_config_differs_from_the_deployed_one_and_the_deployed_one_stays(store):
    store.set_deployed_config("demo", CONFIG, SUMMARY, plan=PLAN, job="j1")
    grown = {**CONFIG, "raypd:decode": {"replicas": 2}}
    store.set_config("demo", grown, {"topology": "decode: 2 replicas", "usdPerHour": 6.0})
    [row] = store.list_deployments()
    assert row["summary"] == SUMMARY  # the list shows what runs ...
    assert store.get_deployment("demo")["summary"]["topology"] == "decode: 2 replicas"  # ... the stack has more
    assert row["deployed"]["configDiffers"] is True and row["deployed"]["tokenReplaced"] is False
    assert store.get_deployment("demo")["config"] == grown
    assert store.deployed("demo")["config"] == CONFIG


def test_equal_configs_written_in_another_key_order_are_not_a_difference(store):
    store.set_deployed_config("demo", CONFIG, SUMMARY)
    store.set_config("demo", dict(reversed(list(CONFIG.items()))), SUMMARY)
    assert store.list_deployments()[0]["deployed"]["configDiffers"] is False


def test_the_token_flag_is_set_with_the_config_and_cleared_by_the_next_up(store):
    store.set_config("demo", CONFIG, SUMMARY, token_replaced=True)  # nothing deployed: nothing to flag
    assert store.deployed("demo") is None
    store.set_deployed_config("demo", CONFIG, SUMMARY)
    store.set_config("demo", CONFIG, SUMMARY, token_replaced=True)
    assert store.deployed("demo")["tokenReplaced"] is True
    assert store.list_deployments()[0]["deployed"]["tokenReplaced"] is True
    store.set_config("demo", CONFIG, SUMMARY)  # None: as it was
    assert store.deployed("demo")["tokenReplaced"] is True
    store.set_deployed_config("demo", CONFIG, SUMMARY)  # deployed with that token
    assert store.deployed("demo")["tokenReplaced"] is False
    store.set_config("demo", CONFIG, SUMMARY, token_replaced=True)
    store.set_config("demo", CONFIG, SUMMARY, token_replaced=False)
    assert store.deployed("demo")["tokenReplaced"] is False


def test_secrets_in_a_plan_are_masked_before_they_are_stored(store):
    store.set_deployed_config("demo", CONFIG, SUMMARY,
                              plan={**PLAN, "echo": "token hf_StorePlanSecret0123456789abcdef"})
    assert "hf_StorePlanSecret" not in str(store.deployed("demo")["plan"])


def test_removing_the_deployment_forgets_what_it_deployed(store):
    store.set_deployed_config("demo", CONFIG, SUMMARY, plan=PLAN)
    store.delete_deployment("demo")
    store.create_deployment("demo", "offline", CONFIG, SUMMARY)  # a new one of the same name
    assert store.deployed("demo") is None


def test_records_an_older_raypd_left_are_completed_without_overwriting_newer_ones(store):
    store.create_deployment("old", "pulumi", CONFIG, SUMMARY, status="deployed")
    store.create_deployment("fresh", "pulumi", CONFIG, SUMMARY)
    with store._engine.begin() as conn:  # a row as version 3 wrote it: config and time only
        conn.execute(insert(db.deployed_configs).values(deployment="demo", config='{"aws:region":"us-east-2"}',
                                                        time=5.0))
    incomplete = {row["name"]: row for row in store.incomplete_deployed()}
    assert set(incomplete) == {"demo", "old", "fresh"}
    assert incomplete["demo"]["deployed"] == {"config": {"aws:region": "us-east-2"}, "summary": False, "plan": False}
    assert incomplete["old"]["deployed"] is None and incomplete["old"]["status"] == "deployed"

    store.fill_in_deployed("demo", summary=SUMMARY, plan=PLAN)
    store.fill_in_deployed("old", config=CONFIG, summary=SUMMARY, at=7.0)
    store.fill_in_deployed("fresh", summary=SUMMARY)  # no config: nothing to insert
    assert store.deployed("demo")["summary"] == SUMMARY and store.deployed("demo")["plan"] == PLAN
    assert store.deployed("demo")["config"] == {"aws:region": "us-east-2"}  # kept as it was
    assert store.deployed("old")["config"] == CONFIG and store.deployed("old")["time"] == 7.0
    assert store.deployed("fresh") is None
    # A second server completing the same record later changes nothing an up recorded meanwhile.
    store.set_deployed_config("old", {"new": 1}, {"topology": "new"})
    store.fill_in_deployed("old", config=CONFIG, summary=SUMMARY)
    assert store.deployed("old")["config"] == {"new": 1} and store.deployed("old")["summary"] == {"topology": "new"}
    assert {row["name"] for row in store.incomplete_deployed()} == {"fresh"}


def _version_3_store(location: Union[Path, str]) -> None:
    """A store as raypd at schema version 3 left it: a planned offline deployment and its
    deployed config (no summary, no plan: those lived elsewhere or nowhere)."""
    engine = db.make_engine(db.parse_url(location))
    try:
        db.upgrade(engine, "0003")
        with engine.begin() as conn:
            conn.execute(insert(db.deployments).values(
                name="legacy", engine="offline", status="planned (offline)", config='{"aws:region":"us-west-2"}',
                summary='{"topology":"t","usdPerHour":1.5}', created_at=1.0, updated_at=2.0))
            # Only the version-3 columns: the INSERT names no other.
            conn.execute(insert(db.deployed_configs).values(
                deployment="legacy", config='{"aws:region":"us-west-2"}', time=3.0))
    finally:
        engine.dispose()


def test_a_version_3_store_is_upgraded_in_place_and_keeps_what_was_deployed(store_url):
    _version_3_store(store_url)
    store = Store(store_url)
    try:
        assert store.schema_version == "0007"
        deployed = store.deployed("legacy")
        assert deployed == {"config": {"aws:region": "us-west-2"}, "summary": None, "plan": None, "job": None,
                            "time": 3.0, "tokenReplaced": False}
        listed = store.list_deployments()[0]
        assert listed["deployed"]["configDiffers"] is False and listed["summary"] == {}  # not recorded then
        store.set_deployed_config("legacy", {"aws:region": "us-west-2"}, {"topology": "t"}, plan=PLAN, job="j")
        assert store.deployed("legacy")["plan"] == PLAN
        with store._engine.connect() as conn:
            flag = conn.execute(select(db.deployed_configs.c.token_replaced)).scalar_one()
        assert flag is False  # the server default for rows written before version 4
    finally:
        store.close()


def test_the_upgrade_can_be_taken_back(tmp_path: Path):
    path = tmp_path / "raypd.db"
    _version_3_store(path)
    Store(path).close()
    from alembic import command

    engine = db.make_engine(db.parse_url(path))
    with engine.begin() as conn:
        command.downgrade(db.alembic_config(conn), "0003")
    engine.dispose()
    columns = [row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(deployed_configs)")]
    assert columns == ["deployment", "config", "time"]
    again = Store(path)  # and forward again, the old row intact
    try:
        assert again.deployed("legacy")["config"] == {"aws:region": "us-west-2"}
        with again._engine.begin() as conn:
            conn.execute(update(db.deployed_configs).values(token_replaced=True))
        assert again.deployed("legacy")["tokenReplaced"] is True
    finally:
        again.close()
