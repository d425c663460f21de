"""Pending changes are not the current state (issue 14): the list, the deployment page, the
Benchmark tab and the API keep what is deployed (offline: planned) apart from settings saved since,
and Discard puts the deployed settings back, the stack's settings file and the store's config in one
write, or not at all.

Most tests use the offline engine as users get it (the real plan in a subprocess); the fake "real"
engine of tests/web/support.py stands in where a test must see what reaches `configure` (the HF
token), hold a job open (409) or make the engine refuse.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from components.config.checks import Report
from components.config.spec import DeploymentSpec
from components.plan.topology import estimate_cost
from tests.patience import PATIENCE_S
from tests.web.support import (
    AUTH,
    HF_TOKEN,
    StoredStackEngine,
    create,
    extract_csrf,
    login,
    text_of,
    wait_for_job,
)
from webui.pending_changes import TOKEN_ADDED, TOKEN_REMOVED, TOKEN_REPLACED

NEW_TOKEN = "hf_SecondTokenReplacesTheFirst0123456789"
GROWN = {"raypd:decode": {"replicas": 2}}


def usd(config: dict[str, Any]) -> float:
    return estimate_cost(DeploymentSpec.from_config(config, "x")).usd_per_hour


def _up(client, name: str) -> dict[str, Any]:
    job = wait_for_job(client, client.post(f"/api/v1/deployments/{name}/up", headers=AUTH).get_json()["job"])
    assert job["status"] == "succeeded", job
    return job


def _patch(client, name: str, config: dict[str, Any]) -> dict[str, Any]:
    response = client.patch(f"/api/v1/deployments/{name}", json={"config": config}, headers=AUTH)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _discard(client, name: str, **kwargs: Any):
    return client.delete(f"/api/v1/deployments/{quote(name, safe='')}/pending-config", headers=AUTH, **kwargs)


def _row(client, name: str) -> dict[str, Any]:
    rows = client.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"]
    return next(row for row in rows if row["name"] == name)


def _detail(client, name: str) -> dict[str, Any]:
    return client.get(f"/api/v1/deployments/{name}", headers=AUTH).get_json()


# ---- what the API says ----

def test_a_deployment_never_deployed_has_only_pending_settings(client):
    create(client, "fresh", GROWN)
    detail = _detail(client, "fresh")
    assert detail["deployed"] is None and detail["pendingChanges"] is None
    pending = detail["pending"]
    assert pending["spec"] == detail["spec"] and pending["changes"] == [] and pending["hfTokenReplaced"] is False
    assert pending["usdPerHour"] == {"old": None, "new": usd(GROWN), "delta": None}
    row = _row(client, "fresh")
    assert (row["settings"], row["hasPendingChanges"], row["deployedAt"]) == ("pending", False, None)
    assert "decode: 2 replicas" in row["topology"] and row["estimatedUsdPerHour"] == usd(GROWN)


@pytest.mark.slow
def test_a_saved_change_stays_pending_and_what_was_planned_is_what_the_list_and_api_show(client):
    create(client, "grow")
    up = _up(client, "grow")
    planned = _detail(client, "grow")
    assert planned["pending"] is None and planned["deployed"]["kind"] == "plan"
    assert planned["deployed"]["label"] == "planned (offline)" and planned["deployed"]["job"] == up["id"]
    row = _row(client, "grow")
    assert (row["settings"], row["hasPendingChanges"]) == ("planned", False) and row["deployedAt"]

    changed = _patch(client, "grow", GROWN)
    assert changed["spec"]["raypd:decode"]["replicas"] == 2  # the PATCH answers the new spec (Contract 4)
    deployed, pending = changed["deployed"], changed["pending"]
    assert deployed["spec"]["raypd:decode"]["replicas"] == 1
    assert "decode: 1 replica " in deployed["summary"]["topology"] and deployed["estimatedUsdPerHour"] == usd({})
    assert pending["spec"] == changed["spec"] and "decode: 2 replicas" in pending["summary"]["topology"]
    assert pending["changes"] == [{"key": "raypd:decode.replicas", "old": 1, "new": 2}]
    assert pending["usdPerHour"]["old"] == usd({}) and pending["usdPerHour"]["new"] == usd(GROWN)
    assert changed["pendingChanges"] == {"config": pending["changes"], "usdPerHour": pending["usdPerHour"]}

    row = _row(client, "grow")  # the list shows what was planned, marked
    assert row["hasPendingChanges"] is True and row["settings"] == "planned"
    assert "decode: 1 replica " in row["topology"] and row["estimatedUsdPerHour"] == usd({})
    assert row["gpus"] == 2

    outputs = _detail(client, "grow")["outputs"]
    preview = wait_for_job(client, client.post("/api/v1/deployments/grow/preview", headers=AUTH).get_json()["job"])
    assert preview["status"] == "succeeded"
    assert {step["op"] for step in preview["summary"]["steps"]} >= {"update"}  # against the stored plan
    after = _detail(client, "grow")
    assert after["outputs"] == outputs  # a preview of pending settings does not replace what was planned
    assert after["outputs"]["topology"]["decode"]["replicas"] == 1
    assert after["status"] == "planned (offline)" and after["pending"] is not None


@pytest.mark.slow
def test_discard_puts_the_planned_settings_back_on_the_stack_and_in_the_store(app, client):
    create(client, "back", {"raypd:image": "public.ecr.aws/x/ray:1"})
    _up(client, "back")
    _patch(client, "back", {**GROWN, "raypd:image": None, "raypd:model": {"maxModelLen": 8192}})
    answer = _discard(client, "back")
    assert answer.status_code == 200, answer.get_json()
    detail = answer.get_json()
    assert detail["pending"] is None and detail["pendingChanges"] is None
    assert detail["spec"] == detail["deployed"]["spec"]
    assert detail["spec"]["raypd:decode"]["replicas"] == 1 and detail["spec"]["raypd:image"] == "public.ecr.aws/x/ray:1"
    assert detail["estimatedUsdPerHour"] == usd({}) and "decode: 1 replica " in detail["summary"]["topology"]
    assert _row(client, "back")["hasPendingChanges"] is False
    # The engine got it too: the offline stack file the next plan reads has the planned settings.
    stack_file = yaml.safe_load(app.extensions["raypd"].store.stack_file("back"))["config"]
    assert stack_file["raypd:decode"]["replicas"] == 1 and stack_file["raypd:model"]["maxModelLen"] == 4096
    audit = app.extensions["raypd"].store.audit_entries()
    line = next(entry for entry in audit if entry["action"] == "discard")
    assert line["result"] == "succeeded" and "raypd:decode.replicas" in line["detail"]
    assert "planned (offline)" in line["detail"]
    # Nothing is left to discard; the next preview has nothing to change.
    again = _discard(client, "back")
    assert again.status_code == 409 and again.get_json()["errors"][0]["field"] == "pending"
    assert "are the deployed ones" in again.get_json()["errors"][0]["message"]
    preview = wait_for_job(client, client.post("/api/v1/deployments/back/preview", headers=AUTH).get_json()["job"])
    assert preview["summary"]["steps"] == [] and "no resource changes" in preview["summary"]["consequences"]


def test_discard_of_a_deployment_never_deployed_says_there_is_nothing_to_go_back_to(client):
    create(client, "never")
    answer = _discard(client, "never")
    assert answer.status_code == 409
    error = answer.get_json()["errors"][0]
    assert error["field"] == "deployed" and "never deployed" in error["message"]
    assert _detail(client, "never")["pending"]["spec"]["raypd:decode"]["replicas"] == 1


HOSTILE_NAMES = ["nope", "a" * 5000, "x;rm -rf ~", "$(touch pwned)", "`id`", "a'b\"c", "line\nbreak", "nul\x00",
                 "esc\x1b[31m", "\u202eevil", "%2e%2e", "\ufffd"]


def _no_such_deployment(client, names: list[str]) -> None:
    create(client, "real")
    for name in names:
        answer = _discard(client, name)
        assert answer.status_code == 404, (name, answer.get_data(as_text=True)[:200])
        assert answer.get_json()["errors"][0]["field"] == "name"
    assert _detail(client, "real")["status"] == "created"


def test_discard_of_a_name_no_deployment_has_is_404_and_never_500(client):
    _no_such_deployment(client, HOSTILE_NAMES)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_hostile_names_never_reach_a_postgresql_store_either(make_app, store_url):
    # PostgreSQL refuses a NUL in text outright: the name must be turned away before the query.
    client = make_app(RAYPD_DATABASE_URL=store_url).test_client()
    _no_such_deployment(client, HOSTILE_NAMES)
    assert client.get("/api/v1/deployments/nul%00", headers=AUTH).status_code == 404


@pytest.mark.parametrize("body,status,field", [
    ('{"force": true}', 400, "force"),
    ('{"confirm": "x"}', 400, "confirm"),
    ("[]", 400, "body"),
    ('"text"', 400, "body"),
    ("{", 400, "body"),
    ('{"a": NaN}', 400, "body"),
    ("[" * 100_000, 413, "body"),
    ('{"x": "\\ud800\\udfff\\u0000"}', 400, "x"),
])
def test_discard_takes_no_body_and_refuses_a_hostile_one_before_anything_changes(client, body, status, field):
    create(client, "body", GROWN)
    answer = _discard(client, "body", data=body, content_type="application/json")
    assert answer.status_code == status, answer.get_data(as_text=True)[:200]
    assert answer.get_json()["errors"][0]["field"] == field
    assert _detail(client, "body")["spec"]["raypd:decode"]["replicas"] == 2


def test_discard_accepts_an_empty_body_or_an_empty_object(fake_app):
    client = fake_app.test_client()
    create(client, "empty")
    _up(client, "empty")
    for body in (None, {}):
        _patch(client, "empty", GROWN)
        assert _discard(client, "empty", json=body).status_code == 200


def test_discard_is_refused_while_a_job_runs_and_changes_nothing(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "busy")
    _up(client, "busy")
    _patch(client, "busy", GROWN)
    fake_engine.configured.clear()
    fake_engine.gate.clear()
    job = client.post("/api/v1/deployments/busy/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    refused = _discard(client, "busy")
    assert refused.status_code == 409 and refused.get_json()["job"] == job
    assert "busy" in refused.get_json()["errors"][0]["message"]
    assert fake_engine.configured == []  # the stack was not touched
    fake_engine.gate.set()
    wait_for_job(client, job)
    assert _detail(client, "busy")["pending"]["changes"][0]["key"] == "raypd:decode.replicas"
    assert _discard(client, "busy").status_code == 200


def test_an_engine_that_refuses_leaves_the_store_and_the_stack_file_as_they_were(make_app):
    engine = StoredStackEngine()
    app = make_app(engine=engine)
    client = app.test_client()
    create(client, "stuck")
    _up(client, "stuck")
    _patch(client, "stuck", GROWN)
    before = _detail(client, "stuck")
    engine.configured.clear()
    engine.refuse_configure = "error: the backend is read-only"
    answer = _discard(client, "stuck")
    assert answer.status_code == 500 and answer.get_json()["errors"][0]["field"] == "engine"
    assert "read-only" in answer.get_json()["errors"][0]["message"]
    after = _detail(client, "stuck")
    assert (after["spec"], after["pending"]) == (before["spec"], before["pending"])
    # One attempt, and nothing to put back: the settings file is written with the store's config or not at all.
    assert [spec.decode.replicas for spec, _, _ in engine.configured] == [1]
    assert engine.stack_config("stuck")["raypd:decode"]["replicas"] == 2
    audit = app.extensions["raypd"].store.audit_entries()
    assert next(e for e in audit if e["action"] == "discard")["result"] == "failed"
    engine.refuse_configure = None
    assert _discard(client, "stuck").status_code == 200
    assert engine.stack_config("stuck")["raypd:decode"]["replicas"] == 1


def test_a_store_that_refuses_the_write_leaves_the_stack_file_as_it_was(make_app):
    engine = StoredStackEngine()
    app = make_app(engine=engine)
    client = app.test_client()
    create(client, "disk")
    _up(client, "disk")
    _patch(client, "disk", GROWN)
    store = app.extensions["raypd"].store
    engine.configured.clear()

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    store.set_config = full_disk  # type: ignore[method-assign]
    answer = _discard(client, "disk")
    # a full disk is the store unavailable for now (webui/unavailable.py): 503 with Retry-After
    assert answer.status_code == 503 and answer.headers.get("Retry-After")
    assert "Traceback" not in answer.get_data(as_text=True)
    del store.set_config
    assert [spec.decode.replicas for spec, _, _ in engine.configured] == [1]  # staged, never written
    assert engine.stack_config("disk")["raypd:decode"]["replicas"] == 2
    assert _detail(client, "disk")["spec"]["raypd:decode"]["replicas"] == 2


def test_an_engine_this_server_lacks_is_503(make_app, tmp_path, fake_engine):
    home = tmp_path / "shared-home"
    with_engine = make_app(home=home, engine=fake_engine).test_client()
    create(with_engine, "elsewhere")
    _up(with_engine, "elsewhere")
    _patch(with_engine, "elsewhere", GROWN)
    without = make_app(home=home).test_client()
    answer = _discard(without, "elsewhere")
    assert answer.status_code == 503 and answer.get_json()["errors"][0]["field"] == "engine"


# ---- the HF token: compared and restored only as far as raypd can know it ----

@pytest.mark.slow
def test_a_replaced_token_stays_pending_after_discard_and_discard_says_it_cannot_bring_the_old_one_back(
        fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "tok", {"raypd:hfToken": HF_TOKEN})
    _up(client, "tok")
    changed = _patch(client, "tok", {"raypd:hfToken": NEW_TOKEN, **GROWN})
    token_change = {c["key"]: c for c in changed["pending"]["changes"]}["raypd:hfToken"]
    assert token_change == {"key": "raypd:hfToken", "old": "[secret]", "new": "[secret]", "note": TOKEN_REPLACED}
    assert changed["pending"]["hfTokenReplaced"] is True
    fake_engine.configured.clear()
    answer = _discard(client, "tok").get_json()
    spec, token, removed = fake_engine.configured[-1]
    assert token is None and removed == []  # the stack keeps the token it has: the new one
    assert spec.hf_token is not None and spec.decode.replicas == 1
    assert answer["spec"]["raypd:hfToken"] == "[secret]"
    assert [c["key"] for c in answer["pending"]["changes"]] == ["raypd:hfToken"]  # still not deployed
    assert _row(client, "tok")["hasPendingChanges"] is True
    again = _discard(client, "tok")
    assert again.status_code == 409 and "cannot be brought back" in again.get_json()["errors"][0]["message"]
    _up(client, "tok")  # deployed with the new token: nothing pending any more
    assert _detail(client, "tok")["pending"] is None and _row(client, "tok")["hasPendingChanges"] is False


def test_a_removed_token_cannot_come_back_by_discard(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "gone", {"raypd:hfToken": HF_TOKEN})
    _up(client, "gone")
    changed = _patch(client, "gone", {"raypd:hfToken": None})
    assert changed["pending"]["changes"] == [
        {"key": "raypd:hfToken", "old": "[secret]", "new": None, "note": TOKEN_REMOVED}]
    only_token = _discard(client, "gone")
    assert only_token.status_code == 409 and "set it again with Change settings" in only_token.get_json()[
        "errors"][0]["message"]
    _patch(client, "gone", GROWN)
    answer = _discard(client, "gone").get_json()
    spec, token, removed = fake_engine.configured[-1]
    assert spec.hf_token is None and token is None and removed == []  # no claim of a token the stack lacks
    assert "raypd:hfToken" not in answer["spec"] and answer["spec"]["raypd:decode"]["replicas"] == 1
    assert [c["key"] for c in answer["pending"]["changes"]] == ["raypd:hfToken"]


def test_a_token_added_since_the_deploy_is_removed_by_discard(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "add")
    _up(client, "add")
    changed = _patch(client, "add", {"raypd:hfToken": HF_TOKEN})
    assert changed["pending"]["changes"] == [
        {"key": "raypd:hfToken", "old": None, "new": "[secret]", "note": TOKEN_ADDED}]
    assert changed["pending"]["hfTokenReplaced"] is False
    answer = _discard(client, "add").get_json()
    spec, token, removed = fake_engine.configured[-1]
    assert removed == ["raypd:hfToken"] and spec.hf_token is None and token is None
    assert answer["pending"] is None and _row(client, "add")["hasPendingChanges"] is False
    _patch(client, "add", {"raypd:hfToken": HF_TOKEN})  # added again: pending as added, not "replaced"
    assert _detail(client, "add")["pending"]["changes"][0]["note"] == TOKEN_ADDED


# ---- what runs is what the checks and benchmarks use ----

def test_preflight_counts_the_deployed_nodes_and_only_an_offline_preview_gets_the_stored_plan(fake_app, fake_engine):
    client = fake_app.test_client()
    seen: list[Any] = []
    checker = fake_app.extensions["raypd"].service.checker
    checker.preflight_fn = lambda spec, deployed, zone: seen.append((spec, deployed)) or Report.of("preflight", [])
    checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
    create(client, "quota")
    _up(client, "quota")
    _patch(client, "quota", GROWN)
    fake_engine.plans_seen.clear()
    wait_for_job(client, client.post("/api/v1/deployments/quota/preview", headers=AUTH).get_json()["job"])
    spec, deployed = seen[-1]
    assert spec.decode.replicas == 2 and deployed.decode.replicas == 1
    assert fake_engine.plans_seen == [None]  # the real engine's preview asks Pulumi, not a stored plan


def test_a_benchmark_is_priced_and_labelled_by_what_runs_not_by_pending_settings(fake_app, fake_engine):
    from serve.benchmark.events import RunResult
    from serve.benchmark.summary import summarize as summarize_run

    state = fake_app.extensions["raypd"]
    state.service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
    fake_engine.live = {"modelId": "qwen3.5-9b", "kubeconfig": "apiVersion: v1\n", "namespace": "inference"}
    records = [{"index": 0, "scheduled_s": 0.0, "sent_s": 0.0, "end_s": 0.3, "ttft_ms": 40.0, "itl_ms": [10.0],
                "e2e_ms": 300.0, "prompt_tokens": 20, "completion_tokens": 2, "input_tokens_requested": 16,
                "max_tokens": 2, "status": 200, "ok": True, "error_kind": None, "error": None}]
    asked: list[list[str]] = []
    state.benchmarks.benchmarker.run_fn = (
        lambda outputs, kubeconfig, name, args, seconds, progress, cancelled:
        asked.append(args) or RunResult(summarize_run(records), records))
    client = fake_app.test_client()
    create(client, "bench")
    _up(client, "bench")
    _patch(client, "bench", {"raypd:mode": "colocated"})
    job = client.post("/api/v1/deployments/bench/benchmarks", json={"rates": [1], "requests": 1}, headers=AUTH)
    assert wait_for_job(client, job.get_json()["job"])["status"] == "succeeded"
    run = client.get(f"/api/v1/benchmarks/{job.get_json()['job']}", headers=AUTH).get_json()
    assert run["settings"]["mode"] == "disaggregated" and run["settings"]["usdPerHour"] == usd({})
    assert "disaggregated" in run["label"]
    assert asked[0][asked[0].index("--usd-per-hour") + 1] == str(usd({}))


# ---- pages ----

def test_the_list_page_shows_what_was_planned_with_a_pending_mark(app):
    browser = app.test_client()
    login(browser)
    create(browser, "mark")
    create(browser, "plain")
    _up(browser, "mark")
    _patch(browser, "mark", GROWN)
    page = text_of(browser.get("/"))
    row = page[page.index('data-name="mark"'):]
    row = row[: row.index("</tr>")]
    assert "pending changes" in row and "decode: 1 replica " in row and f"${usd({}):,.2f}/h" in row
    plain = page[page.index('data-name="plain"'):]
    plain = plain[: plain.index("</tr>")]
    assert "pending changes" not in plain and "not deployed yet" in plain


def test_the_page_shows_what_was_planned_and_the_pending_panel_with_deploy_and_discard(app):
    browser = app.test_client()
    login(browser)
    create(browser, "panel")
    _up(browser, "panel")
    _patch(browser, "panel", GROWN)
    page = text_of(browser.get("/deployments/panel"))
    line = page[page.index('id="deployed-line"'):]
    line = line[: line.index("</p>")]
    assert "Planned (offline): " in line and "decode: 1 replica " in line and "pending changes" in line
    assert f"${usd({}):,.2f}/h" in line
    panel = page[page.index('id="pending-changes"'):]
    panel = panel[: panel.index("</section>")]
    assert 'data-key="raypd:decode.replicas"' in panel
    assert f'id="old-cost">${usd({}):,.2f}/h' in panel and f'id="new-cost">${usd(GROWN):,.2f}/h' in panel
    assert 'id="pending-deploy"' in panel and 'id="discard-changes"' in panel
    assert 'action="/deployments/panel/discard"' in panel and "data-confirm=" in panel
    assert "Summary <span" in page and "(planned (offline))" in page
    assert "decode: 2 replicas" not in page.split('id="pending-changes"')[0]  # the head shows what was planned
    tab = text_of(browser.get("/deployments/panel/benchmark"))
    header = tab[tab.index('id="deployed-line"'):]
    header = header[: header.index("</p>")]
    assert "decode: 1 replica " in header and "a benchmark measures what runs" in header


def test_a_never_deployed_page_says_so_and_offers_no_discard(app):
    browser = app.test_client()
    login(browser)
    create(browser, "new-one")
    page = text_of(browser.get("/deployments/new-one"))
    assert 'id="not-deployed"' in page and "Not planned yet" in page
    assert 'id="discard-changes"' not in page and "Not planned yet: " in page and "(not planned yet)" in page


def test_discard_from_the_page_needs_the_csrf_token_then_puts_the_settings_back(app):
    browser = app.test_client()
    login(browser)
    create(browser, "form")
    _up(browser, "form")
    _patch(browser, "form", GROWN)
    page = text_of(browser.get("/deployments/form"))
    assert browser.post("/deployments/form/discard", data={}).status_code == 403
    assert _detail(browser, "form")["pending"] is not None
    done = browser.post("/deployments/form/discard", data={"csrf_token": extract_csrf(page)})
    assert done.status_code == 302 and done.headers["Location"].endswith("/deployments/form")
    shown = text_of(browser.get(done.headers["Location"]))
    assert "Pending changes discarded: the stack has the planned (offline) settings again" in shown
    assert 'id="pending-changes"' not in shown and 'class="badge badge-warn pending-mark"' not in shown
    assert 'name="raypd:decode.replicas" value="1"' in text_of(browser.get("/deployments/form/change"))
    refused = browser.post("/deployments/form/discard", data={"csrf_token": extract_csrf(page)})
    assert refused.status_code == 302
    assert "nothing to discard" in text_of(browser.get(refused.headers["Location"]))
    assert browser.post("/deployments/nope/discard", data={"csrf_token": extract_csrf(page)}).status_code == 404


# ---- team mode and older stores ----

@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # team mode only
def test_a_second_server_previews_against_the_plan_the_first_one_made(make_app, store_url, tmp_path):
    first = make_app(home=tmp_path / "server-a", RAYPD_DATABASE_URL=store_url).test_client()
    second = make_app(home=tmp_path / "server-b", RAYPD_DATABASE_URL=store_url).test_client()
    create(first, "team")
    _up(first, "team")
    # The second server saves a change (its offline engine writes its own stack file) and previews it.
    _patch(second, "team", GROWN)
    assert _row(first, "team")["hasPendingChanges"] is True
    preview = wait_for_job(second, second.post("/api/v1/deployments/team/preview", headers=AUTH).get_json()["job"])
    assert preview["status"] == "succeeded"
    steps = {step["name"]: step["op"] for step in preview["summary"]["steps"]}
    assert steps and "create" not in steps.values()  # compared with the first server's plan, not with nothing
    assert not list(tmp_path.rglob("last-plan.json"))
    assert _discard(first, "team").status_code == 200
    assert _detail(second, "team")["pending"] is None


@pytest.mark.slow
def test_an_older_raypd_home_is_completed_at_start(make_app, tmp_path, caplog):
    """A home an older raypd wrote: the plan in workspaces/<stack>/last-plan.json, a deployed record
    without summary, and a deployment deployed before deployed records existed."""
    from alembic import command

    from webui import db

    home = tmp_path / "old-home"
    client = make_app(home=home).test_client()
    create(client, "filed")
    _up(client, "filed")
    create(client, "ancient")
    _up(client, "ancient")
    store = store_of(client)
    plan = store.deployed("filed")["plan"]
    legacy = home / "workspaces" / "filed"
    legacy.mkdir(parents=True)
    (legacy / "last-plan.json").write_text(json.dumps(plan))
    # ... and the stack settings file there too: before version 5 only that server's home had it.
    settings_file = store.stack_file("filed")
    (legacy / "Pulumi.filed.yaml").write_text(settings_file)
    with store._engine.begin() as conn:
        conn.execute(db.deployed_configs.delete().where(db.deployed_configs.c.deployment == "ancient"))
        command.downgrade(db.alembic_config(conn), "0003")  # summary and plan columns, stack files gone
    caplog.set_level(logging.INFO, logger="webui.deployments.upgrades")
    again = make_app(home=home).test_client()
    assert "completed the deployed-settings records of 2 deployment(s)" in caplog.text
    # The file moved into the store; "ancient" had none anywhere: an offline one is rebuilt from its config.
    assert "moved the stack settings files of 2 deployment(s) into the store" in caplog.text
    assert store_of(again).stack_file("filed") == settings_file and not (legacy / "Pulumi.filed.yaml").exists()
    assert yaml.safe_load(store_of(again).stack_file("ancient"))["config"]["raypd:model"]
    upgraded = store_of(again)
    assert upgraded.schema_version == "0007"
    assert upgraded.deployed("filed")["plan"] == plan and upgraded.deployed("filed")["summary"]["gpus"] == 2
    assert not (home / "workspaces" / "filed" / "last-plan.json").exists()
    assert upgraded.deployed("ancient")["config"] == _detail(again, "ancient")["spec"]
    assert _row(again, "ancient")["settings"] == "planned" and _row(again, "filed")["topology"]
    _patch(again, "filed", GROWN)
    preview = wait_for_job(again, again.post("/api/v1/deployments/filed/preview", headers=AUTH).get_json()["job"])
    assert preview["summary"]["steps"]  # against the plan that was in the file


def store_of(client) -> Any:
    return client.application.extensions["raypd"].store


def test_a_tear_down_that_removes_the_record_while_the_page_is_drawn_redirects_to_the_list(fake_app, fake_engine):
    """The page reads the deployment more than once; offline a destroy takes milliseconds, so the
    record may go between two reads: that is the "torn down" redirect, never a 500."""
    browser = fake_app.test_client()
    login(browser)
    create(browser, "brief")
    fake_engine.gate.clear()
    job = browser.delete("/api/v1/deployments/brief", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    service = fake_app.extensions["raypd"].service
    drawn = service.get_with_plan

    def then_removed(name: str, jobs: int = 10) -> Any:
        answer = drawn(name, jobs)
        service.store.delete_deployment(name)  # the destroy finished just now
        return answer

    service.get_with_plan = then_removed  # type: ignore[method-assign]
    page = browser.get(f"/deployments/brief?job={job}")
    assert page.status_code == 302 and page.headers["Location"].endswith("/?removed=brief")
    fake_engine.gate.set()
    wait_for_job(browser, job)
