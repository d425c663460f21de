"""Pending operations left by an interrupted update: shown, blocking, cleared only when confirmed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job

PENDING = [{"urn": "urn:pulumi:demo::raypd::eks:index:Cluster::cluster-eks", "type": "eks:index:Cluster",
            "name": "cluster-eks", "operation": "creating",
            "check": "EKS console > Clusters: a cluster named raypd-demo"}]


def _job(client, name: str, operation: str, body: Any = None) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{name}/{operation}", json=body, headers=AUTH)
    assert response.status_code == 202, response.get_json()
    return wait_for_job(client, response.get_json()["job"])


def test_pending_operations_block_deploy_and_are_listed_with_where_to_look(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "demo")
    fake_engine.pending = list(PENDING)
    job = _job(client, "demo", "up")
    assert job["status"] == "failed"
    assert "1 pending operation(s)" in job["error"] and "creating eks:index:Cluster cluster-eks" in job["error"]
    assert job["summary"]["pendingOperations"] == PENDING
    assert client.get("/api/v1/deployments/demo/pending", headers=AUTH).get_json() == {"operations": PENDING}
    destroy = client.delete("/api/v1/deployments/demo", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, destroy)["status"] == "failed"
    assert client.get("/api/v1/deployments/demo", headers=AUTH).status_code == 200  # never removed
    assert fake_engine.removed == []


@pytest.mark.slow
def test_clearing_needs_the_typed_name_then_deploy_works_again(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "demo")
    fake_engine.pending = list(PENDING)
    for body in (None, {}, {"confirm": "dem"}, {"confirm": 7}):
        refused = client.post("/api/v1/deployments/demo/clear-pending", json=body, headers=AUTH)
        assert refused.status_code == 400, body
        assert refused.get_json()["errors"][0]["field"] in ("confirm", "body")
    assert fake_engine.pending == PENDING
    assert _job(client, "demo", "clear-pending", {"confirm": "demo"})["status"] == "succeeded"
    assert fake_engine.pending == []
    assert _job(client, "demo", "up")["status"] == "succeeded"


def test_offline_deployments_have_nothing_pending(client):
    create(client, "plan")
    assert client.get("/api/v1/deployments/plan/pending", headers=AUTH).get_json()["operations"] == []
    refused = client.post("/api/v1/deployments/plan/clear-pending", json={"confirm": "plan"}, headers=AUTH)
    assert refused.status_code == 409


@pytest.mark.slow
def test_the_page_shows_the_pending_operations_and_a_confirmed_clear(fake_app, fake_engine):
    browser = fake_app.test_client()
    login(browser)
    create(browser, "demo")
    fake_engine.pending = list(PENDING)
    _job(browser, "demo", "up")
    page = text_of(browser.get("/deployments/demo"))
    assert 'id="pending"' in page
    assert "EKS console > Clusters: a cluster named raypd-demo" in page and "cluster-eks" in page
    csrf = extract_csrf(page)
    wrong = browser.post("/deployments/demo/clear-pending", data={"csrf_token": csrf, "confirm": "nope"})
    assert "type the deployment name" in text_of(browser.get(wrong.headers["Location"]))
    assert fake_engine.pending == PENDING
    cleared = browser.post("/deployments/demo/clear-pending", data={"csrf_token": csrf, "confirm": "demo"})
    job_id = cleared.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"
    assert fake_engine.pending == []
    assert 'id="pending"' not in text_of(browser.get(f"/deployments/demo?job={job_id}"))
