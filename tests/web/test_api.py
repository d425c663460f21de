"""The JSON API (Contract 4) through the Flask test client."""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap

import pytest
from flask import Flask

from tests.patience import PATIENCE_S
from tests.web.support import AUTH, TOKEN, create, wait_for_job
from webui.engines.base import OFFLINE_NOTICE
from webui.openapi import entry_of


def sse_records(body: str) -> list[dict]:
    return [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]


# ---- auth ----

API_CALLS = [
    ("get", "/api/v1/deployments"),
    ("post", "/api/v1/deployments"),
    ("get", "/api/v1/deployments/demo"),
    ("delete", "/api/v1/deployments/demo"),
    ("post", "/api/v1/deployments/demo/preview"),
    ("post", "/api/v1/deployments/demo/up"),
    ("post", "/api/v1/deployments/demo/refresh"),
    ("get", "/api/v1/jobs/abc"),
    ("get", "/api/v1/jobs/abc/events"),
    ("post", "/api/v1/jobs/abc/cancel"),
    ("get", "/api/v1/openapi.json"),
]


@pytest.mark.parametrize("method,path", API_CALLS)
def test_every_api_route_refuses_requests_without_the_token(client, method, path):
    missing = getattr(client, method)(path)
    wrong = getattr(client, method)(path, headers={"Authorization": "Bearer not-the-token-at-all"})
    for response in (missing, wrong):
        assert response.status_code == 401
        assert response.get_json()["errors"][0]["field"] == "Authorization"
        assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_healthz_answers_without_a_token(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_readyz_answers_without_a_token_while_the_store_answers(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ready"}


def test_api_answers_carry_security_headers(client):
    response = client.get("/api/v1/deployments", headers=AUTH)
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]
    assert "unsafe-inline" not in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "no-referrer"


# ---- create and read ----

def test_create_validates_and_records_the_deployment_without_running_anything(client):
    response = client.post("/api/v1/deployments", headers=AUTH, json={
        "name": "demo", "config": {"aws:region": "us-west-2", "raypd:decode": {"replicas": 2}},
    })
    assert response.status_code == 201
    assert response.headers["Location"].endswith("/api/v1/deployments/demo")
    body = response.get_json()
    assert body["status"] == "created"
    assert body["engine"] == "offline"
    assert body["notice"] == OFFLINE_NOTICE
    assert body["spec"]["aws:region"] == "us-west-2"
    assert body["spec"]["raypd:decode"]["replicas"] == 2
    assert body["jobs"] == []
    listed = client.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"]
    assert [d["name"] for d in listed] == ["demo"]
    assert listed[0]["notice"] == OFFLINE_NOTICE
    assert listed[0]["estimatedUsdPerHour"] > 0


def test_list_shows_model_mode_topology_region_and_cost(client):
    create(client, "colo", {"raypd:mode": "colocated", "aws:region": "eu-west-1"})
    row = client.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"][0]
    assert row["mode"] == "colocated"
    assert row["region"] == "eu-west-1"
    assert row["modelId"] == "qwen3.5-9b"
    assert "colocated" in row["topology"] and "g6.8xlarge" in row["topology"]
    assert row["lastOperation"] is None


def test_duplicate_name_is_a_conflict(client):
    create(client, "demo")
    response = client.post("/api/v1/deployments", json={"name": "demo"}, headers=AUTH)
    assert response.status_code == 409
    assert response.get_json()["errors"][0]["field"] == "name"


# ---- 400s ----

@pytest.mark.parametrize("body,content_type,field", [
    ('{"name": "demo", ', "application/json", "body"),
    ("[1, 2]", "application/json", "body"),
    ('{"name": "demo", "x": NaN}', "application/json", "body"),
    ('{"config": {}}', "application/json", "name"),
    ('{"name": 42}', "application/json", "name"),
    ('{"name": "demo", "config": [1]}', "application/json", "config"),
    ('{"name": "demo", "extra": true}', "application/json", "extra"),
    ("name=demo", "application/x-www-form-urlencoded", "Content-Type"),
    ('{"name": "Not_A_Valid_Name"}', "application/json", "name"),
    ('{"name": "demo\\n"}', "application/json", "name"),
])
def test_bad_bodies_get_400_with_the_field_named(app, client, body, content_type, field):
    response = client.post("/api/v1/deployments", data=body, content_type=content_type, headers=AUTH)
    assert response.status_code == 400
    state = app.extensions["raypd"]
    assert state.store.list_deployments() == [] and state.store.stack_file("demo") is None  # nothing half-made
    assert list(state.settings.work_root.iterdir()) == []
    errors = response.get_json()["errors"]
    assert field in [e["field"] for e in errors], errors
    assert all(e["message"] for e in errors)


@pytest.mark.parametrize("config,field,fragment", [
    ({"raypd:prefill": {"tensorParallelSize": 2}}, "raypd:prefill.tensorParallelSize", "g6.8xlarge has 1"),
    ({"raypd:prefill": {"replicas": "two"}}, "raypd:prefill.replicas", ""),
    ({"raypd:model": {"gpuMemoryUtilization": 1.5}}, "raypd:model.gpuMemoryUtilization", ""),
    ({"raypd:bogus": 1}, "raypd:bogus", "unknown key"),
    ({"kubernetes:context": "x"}, "kubernetes:context", "unknown key"),
    ({"raypd:hfToken": 12345}, "raypd:hfToken", "string"),
    ({"aws:region": "mars-1"}, "aws:region", "region"),
])
def test_invalid_config_is_rejected_per_field(client, config, field, fragment):
    response = client.post("/api/v1/deployments", json={"name": "demo", "config": config}, headers=AUTH)
    assert response.status_code == 400
    errors = {e["field"]: e["message"] for e in response.get_json()["errors"]}
    assert field in errors, errors
    assert fragment in errors[field]
    assert client.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"] == []


def test_huge_body_is_refused_with_413(client):
    response = client.post("/api/v1/deployments", data="x" * (200 * 1024),
                           content_type="application/json", headers=AUTH)
    assert response.status_code == 413
    assert response.get_json()["errors"][0]["field"] == "body"


def test_operation_endpoints_refuse_unknown_body_keys(client):
    create(client, "demo")
    response = client.post("/api/v1/deployments/demo/up", json={"dryRun": True}, headers=AUTH)
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["field"] == "dryRun"
    response = client.post("/api/v1/deployments/demo/verify", json={"force": True}, headers=AUTH)
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["field"] == "force"


@pytest.mark.parametrize("force", ["true", 1, None, {"x": 1}, "\ud800"])
def test_up_force_must_be_a_boolean(client, force):
    create(client, "demo")
    response = client.post("/api/v1/deployments/demo/up", json={"force": force}, headers=AUTH)
    assert response.status_code == 400
    assert response.get_json()["errors"] == [{"field": "force", "message": "must be true or false"}]


@pytest.mark.parametrize("method,path,body,errors", [
    ("post", "/api/v1/deployments", {"name": 42}, [("name", "must be a string")]),
    ("post", "/api/v1/deployments", {"name": "demo", "config": [1]},
     [("config", "must be an object of Contract 1 keys")]),
    ("post", "/api/v1/deployments", {"config": {}}, [("name", "is required")]),
    ("post", "/api/v1/deployments", {"name": "demo", "config": {}, "dryRun": True},
     [("dryRun", "unknown key; allowed: config, name")]),
    ("patch", "/api/v1/deployments/demo", {"config": None},
     [("config", "must be an object of Contract 1 keys (null resets one)")]),
    ("patch", "/api/v1/deployments/demo", {}, [("config", "is required")]),
    ("post", "/api/v1/deployments/demo/up", {"dryRun": True}, [("dryRun", "unknown key; allowed: force")]),
    ("post", "/api/v1/deployments/demo/preview", {"force": True}, [("force", "unknown key; allowed: none")]),
    ("post", "/api/v1/deployments/demo/clear-pending", {"confirm": 7}, [("confirm", "must be the deployment's name")]),
    ("post", "/api/v1/deployments/demo/clear-pending", {}, [("confirm", "is required")]),
    ("post", "/api/v1/deployments/demo/clear-pending", None, [("body", "a JSON object is required")]),
    ("post", "/api/v1/jobs/abc/cancel", {"now": True}, [("now", "unknown key; allowed: none")]),
])
def test_request_models_refuse_in_the_words_users_rely_on(client, method, path, body, errors):
    create(client, "demo")
    response = getattr(client, method)(path, json=body, headers=AUTH)
    assert response.status_code == 400
    assert [(e["field"], e["message"]) for e in response.get_json()["errors"]] == errors


# ---- 404s ----

@pytest.mark.parametrize("method,path", [
    ("get", "/api/v1/deployments/nope"),
    ("post", "/api/v1/deployments/nope/up"),
    ("post", "/api/v1/deployments/nope/preview"),
    ("delete", "/api/v1/deployments/nope"),
    ("get", "/api/v1/jobs/0000"),
    ("get", "/api/v1/jobs/0000/events"),
    ("post", "/api/v1/jobs/0000/cancel"),
    ("get", "/api/v1/no-such-route"),
])
def test_unknown_things_are_404_in_json(client, method, path):
    response = getattr(client, method)(path, headers=AUTH)
    assert response.status_code == 404
    assert response.get_json()["errors"][0]["message"]


def test_wrong_method_is_405_in_json(client):
    response = client.put("/api/v1/deployments", headers=AUTH)
    assert response.status_code == 405
    assert response.get_json()["errors"][0]["field"] == "method"


# ---- jobs: lifecycle, 409, cancel ----

@pytest.mark.slow
def test_offline_up_runs_the_plan_and_reaches_100_percent(client):
    create(client, "demo")
    response = client.post("/api/v1/deployments/demo/up", headers=AUTH)
    assert response.status_code == 202
    assert response.get_json()["notice"] == OFFLINE_NOTICE
    job_id = response.get_json()["job"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "succeeded", job
    assert job["progress"]["done"] == job["progress"]["total"] > 10
    assert job["notice"] == OFFLINE_NOTICE
    detail = client.get("/api/v1/deployments/demo", headers=AUTH).get_json()
    assert detail["status"] == "planned (offline)"
    assert detail["outputs"]["kubeconfig"] == "[secret]"
    assert detail["outputs"]["portForwardCommand"].startswith("kubectl -n inference port-forward")
    types = {r["type"] for r in detail["resources"]}
    assert "kubernetes:ray.io/v1:RayService" in types
    assert detail["jobs"][0]["id"] == job_id
    assert detail["connect"]["portForward"] == detail["outputs"]["portForwardCommand"]
    # The event stream replays the whole job and ends with it.
    events = sse_records(client.get(f"/api/v1/jobs/{job_id}/events", headers=AUTH).get_data(as_text=True))
    assert events[-1]["kind"] == "end" and events[-1]["status"] == "succeeded"
    resources = [e for e in events if e["kind"] == "resource" and e["state"] == "finished"]
    assert len(resources) == job["progress"]["total"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)


@pytest.mark.slow
def test_offline_destroy_removes_the_deployment(client):
    create(client, "gone")
    job_id = client.delete("/api/v1/deployments/gone", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    assert client.get("/api/v1/deployments/gone", headers=AUTH).status_code == 404
    assert client.get(f"/api/v1/jobs/{job_id}", headers=AUTH).get_json()["operation"] == "destroy"


@pytest.mark.slow
def test_invalid_stack_file_fails_the_job_with_a_readable_error(app, client):
    create(client, "broken")
    # A settings file the program refuses (as a hand edit of the stored file would be).
    app.extensions["raypd"].store.save_stack_file("broken", "config:\n  raypd:prefill:\n    tensorParallelSize: 4\n")
    job_id = client.post("/api/v1/deployments/broken/preview", headers=AUTH).get_json()["job"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed"
    assert "raypd:prefill.tensorParallelSize" in job["error"]
    assert "Traceback" not in job["error"]
    # A preview changes nothing: its failure is the job's, the deployment keeps its status.
    assert client.get("/api/v1/deployments/broken", headers=AUTH).get_json()["status"] == "created"


def test_a_failed_preview_or_cancelled_refresh_leaves_a_deployed_stack_deployed(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "live")
    assert wait_for_job(client, client.post("/api/v1/deployments/live/up", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    fake_engine.fail_with = "error: preview failed: AccessDenied"
    failed = wait_for_job(client, client.post("/api/v1/deployments/live/preview", headers=AUTH).get_json()["job"])
    assert failed["status"] == "failed"
    assert client.get("/api/v1/deployments/live", headers=AUTH).get_json()["status"] == "deployed"
    fake_engine.fail_with = None
    fake_engine.gate.clear()
    refresh = client.post("/api/v1/deployments/live/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    client.post(f"/api/v1/jobs/{refresh}/cancel", headers=AUTH)
    assert wait_for_job(client, refresh)["status"] == "cancelled"
    detail = client.get("/api/v1/deployments/live", headers=AUTH).get_json()
    assert detail["status"] == "deployed"
    assert [job["status"] for job in detail["jobs"][:2]] == ["cancelled", "failed"]  # history keeps them


def test_a_deployment_made_with_a_removed_ones_name_starts_with_an_empty_history(client):
    create(client, "reused")
    assert wait_for_job(client, client.post("/api/v1/deployments/reused/preview", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    assert wait_for_job(client, client.delete("/api/v1/deployments/reused", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    create(client, "reused")
    assert client.get("/api/v1/deployments/reused", headers=AUTH).get_json()["jobs"] == []


def test_second_operation_while_one_runs_is_409_with_the_running_job(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "busy")
    fake_engine.gate.clear()
    first = client.post("/api/v1/deployments/busy/up", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    for method, path in (("post", "/api/v1/deployments/busy/refresh"), ("delete", "/api/v1/deployments/busy")):
        response = getattr(client, method)(path, headers=AUTH)
        assert response.status_code == 409
        assert response.get_json()["job"] == first
    assert client.get("/api/v1/deployments/busy", headers=AUTH).get_json()["status"] == "updating"
    fake_engine.gate.set()
    assert wait_for_job(client, first)["status"] == "succeeded"
    detail = client.get("/api/v1/deployments/busy", headers=AUTH).get_json()
    assert detail["status"] == "deployed"
    assert detail["engine"] == "pulumi" and "notice" not in detail


def test_failed_operation_records_the_error_and_status(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "flaky")
    fake_engine.fail_with = "error: creating EKS Cluster: AccessDenied"
    job_id = client.post("/api/v1/deployments/flaky/up", headers=AUTH).get_json()["job"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "failed"
    assert "AccessDenied" in job["error"]
    assert client.get("/api/v1/deployments/flaky", headers=AUTH).get_json()["status"] == "up failed"
    events = sse_records(client.get(f"/api/v1/jobs/{job_id}/events", headers=AUTH).get_data(as_text=True))
    assert events[-1] == {**events[-1], "kind": "end", "status": "failed"}
    assert any(e.get("state") == "failed" for e in events)


def test_cancel_stops_a_running_job(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "stopme")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/stopme/up", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    response = client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert response.status_code == 202
    job = wait_for_job(client, job_id)
    assert job["status"] == "cancelled"
    assert client.get("/api/v1/deployments/stopme", headers=AUTH).get_json()["status"] == "up cancelled"
    again = client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert again.status_code == 409


@pytest.mark.slow
def test_cancel_kills_the_offline_plan_subprocess(client):
    create(client, "killme")
    job_id = client.post("/api/v1/deployments/killme/up", headers=AUTH).get_json()["job"]
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 202
    job = wait_for_job(client, job_id)
    assert job["status"] == "cancelled"
    assert job["progress"]["done"] < 30


def test_sse_resumes_after_last_event_id(fake_app):
    client = fake_app.test_client()
    create(client, "resume")
    job_id = client.post("/api/v1/deployments/resume/up", headers=AUTH).get_json()["job"]
    wait_for_job(client, job_id)
    response = client.get(f"/api/v1/jobs/{job_id}/events", headers=AUTH)
    assert response.mimetype == "text/event-stream"
    every = sse_records(response.get_data(as_text=True))
    ids = re.findall(r"^id: (\d+)$", response.get_data(as_text=True), flags=re.M)
    assert [int(i) for i in ids] == [e["seq"] for e in every]
    middle = every[len(every) // 2]["seq"]
    rest = sse_records(client.get(f"/api/v1/jobs/{job_id}/events",
                                  headers={**AUTH, "Last-Event-ID": str(middle)}).get_data(as_text=True))
    assert [e["seq"] for e in rest] == [e["seq"] for e in every if e["seq"] > middle]
    assert rest[-1]["kind"] == "end"


def test_jobs_answer_in_contract_shape(fake_app):
    client = fake_app.test_client()
    create(client, "shape")
    job_id = client.post("/api/v1/deployments/shape/preview", headers=AUTH).get_json()["job"]
    job = wait_for_job(client, job_id)
    assert {"id", "deployment", "operation", "status", "progress", "error"} <= set(job)
    assert job["deployment"] == "shape" and job["operation"] == "preview"
    assert set(job["progress"]) == {"done", "total"}


# ---- restart recovery ----

def test_restart_marks_running_jobs_interrupted_with_a_hint(make_app, tmp_path, fake_engine):
    home = tmp_path / "shared-home"
    first = make_app(home=home, engine=fake_engine)
    client = first.test_client()
    create(client, "crashy")
    fake_engine.gate.clear()
    job_id = client.post("/api/v1/deployments/crashy/up", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    # A crash: the first app's threads never get to record an ending (its store is left as is).
    second = make_app(home=home, engine=fake_engine)
    client2 = second.test_client()
    job = client2.get(f"/api/v1/jobs/{job_id}", headers=AUTH).get_json()
    assert job["status"] == "interrupted"
    hint = job["hint"]
    assert hint.index("Close this job") < hint.index("releases the stack's lock") < hint.index("Run Refresh")
    assert client2.get("/api/v1/deployments/crashy", headers=AUTH).get_json()["status"] == "interrupted"
    events = sse_records(client2.get(f"/api/v1/jobs/{job_id}/events", headers=AUTH).get_data(as_text=True))
    assert events[-1]["status"] == "interrupted"
    # Cancel closes it and releases the stack lock through the engine.
    response = client2.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert response.status_code == 202
    assert response.get_json()["status"] == "cancelled"
    assert fake_engine.released == ["crashy"]
    assert client2.get("/api/v1/deployments/crashy", headers=AUTH).get_json()["status"] == "created"
    # The first app's worker now ends too; it must not overwrite what the second app recorded.
    first.extensions["raypd"].runner.shutdown(wait=True)
    assert client2.get(f"/api/v1/jobs/{job_id}", headers=AUTH).get_json()["status"] == "cancelled"
    assert client2.get("/api/v1/deployments/crashy", headers=AUTH).get_json()["status"] == "created"
    follow_up = client2.post("/api/v1/deployments/crashy/refresh", headers=AUTH)
    assert follow_up.status_code == 202


# ---- audit ----

def test_every_operation_leaves_an_audit_line(fake_app, caplog):
    client = fake_app.test_client()
    caplog.set_level("INFO", logger="raypd.audit")
    create(client, "audited")
    job_id = client.post("/api/v1/deployments/audited/up", headers=AUTH).get_json()["job"]
    wait_for_job(client, job_id)
    lines = [r.getMessage() for r in caplog.records if r.name == "raypd.audit"]
    assert any("action='create'" in line and "target=audited" in line for line in lines), lines
    assert any("action=up" in line and "result=succeeded" in line and "actor=api-token@" in line
               for line in lines), lines
    stored = fake_app.extensions["raypd"].store.audit_entries()
    assert {("create", "succeeded"), ("up", "succeeded")} <= {(e["action"], e["result"]) for e in stored}


# ---- OpenAPI ----

def documented_routes(document: dict) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, item in document["paths"].items() for method in item}


def registered_routes(app: Flask) -> set[tuple[str, str]]:
    """Every /api/v1 route and method the app answers, in the document's path syntax."""
    registered = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/"):
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule[len("/api/v1"):])
        path = path.replace("{job_id}", "{id}")
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            registered.add((path, method))
    return registered


def test_openapi_documents_exactly_the_registered_api_routes(app, client):
    document = client.get("/api/v1/openapi.json", headers=AUTH).get_json()
    assert document["openapi"].startswith("3.")
    assert documented_routes(document) == registered_routes(app), "give the view an entry: webui.openapi.documented"


def test_a_route_without_an_entry_is_missing_from_the_document(make_app):
    app = make_app()
    app.add_url_rule("/api/v1/planted/<name>", "planted", lambda name: name, methods=["POST"])
    document = app.test_client().get("/api/v1/openapi.json", headers=AUTH).get_json()
    assert registered_routes(app) - documented_routes(document) == {("/planted/{name}", "POST")}


def _parsed_body(view) -> str | None:
    """The model a view hands to json_body, read from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(view)))
    models = {node.args[0].id for node in ast.walk(tree) if isinstance(node, ast.Call)
              and getattr(node.func, "id", None) == "json_body" and isinstance(node.args[0], ast.Name)}
    assert len(models) <= 1, models
    return next(iter(models), None)


def test_each_view_documents_the_body_it_parses(app):
    found = {}
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        entry = entry_of(view)
        if entry is not None:
            found[rule.endpoint] = (entry.body.__name__ if entry.body else None, _parsed_body(view))
    assert len(found) >= 25, found
    assert {endpoint: pair for endpoint, pair in found.items() if pair[0] != pair[1]} == {}


def test_token_is_never_accepted_in_the_query_string(client):
    response = client.get(f"/api/v1/deployments?token={TOKEN}")
    assert response.status_code == 401
