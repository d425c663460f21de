"""A check report says when it no longer applies (issue 29 §2): a preflight is made for the stack's
settings, a verify for what runs; once those change (a Discard, a change, a Deploy), the last report
of that kind is marked stale, in the API and on the page, until the check runs again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.support import AUTH, create, login, text_of, wait_for_job
from webui.pending_changes import STALE_PREFLIGHT, report_staleness, settings_digest


def _run(client, name: str, operation: str) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{name}/{operation}", headers=AUTH)
    assert response.status_code == 202, response.get_json()
    job = wait_for_job(client, response.get_json()["job"])
    assert job["status"] == "succeeded", job
    return job


def _checks(client, name: str) -> dict[str, Any]:
    return client.get(f"/api/v1/deployments/{name}/checks", headers=AUTH).get_json()


@pytest.mark.slow
def test_after_discard_the_preflight_of_the_discarded_settings_is_stale(client):
    login(client)
    create(client, "demo")
    _run(client, "demo", "up")
    client.patch("/api/v1/deployments/demo", json={"config": {"raypd:model": {"maxModelLen": 8192}}}, headers=AUTH)
    preview = _run(client, "demo", "preview")  # its preflight checked maxModelLen 8192
    assert _checks(client, "demo")["preflight"]["stale"] is False
    assert client.delete("/api/v1/deployments/demo/pending-config", headers=AUTH).status_code == 200

    preflight = _checks(client, "demo")["preflight"]
    assert preflight["job"] == preview["id"] and preflight["stale"] is True
    assert preflight["staleReason"] == STALE_PREFLIGHT
    page = text_of(client.get("/deployments/demo"))
    assert "This report no longer applies: " + STALE_PREFLIGHT in page
    assert "preflight not checked (stale)" in page  # the job panel's line, too

    _run(client, "demo", "preflight")  # run again: it applies
    fresh = _checks(client, "demo")["preflight"]
    assert fresh["stale"] is False and "staleReason" not in fresh
    assert "This report no longer applies" not in text_of(client.get("/deployments/demo"))


@pytest.mark.slow
def test_a_verify_of_what_ran_before_a_deploy_is_stale(client):
    create(client, "demo")
    _run(client, "demo", "up")
    _run(client, "demo", "verify")
    assert _checks(client, "demo")["verify"]["stale"] is False
    client.patch("/api/v1/deployments/demo", json={"config": {"raypd:decode": {"replicas": 2}}}, headers=AUTH)
    assert _checks(client, "demo")["verify"]["stale"] is False  # pending: what runs is the same
    _run(client, "demo", "up")  # offline: no verify after it
    verify = _checks(client, "demo")["verify"]
    assert verify["stale"] is True and "verify again" in verify["staleReason"]


def test_staleness_compares_the_settings_a_report_was_made_for():
    a, b = {"raypd:decode": {"replicas": 1}}, {"raypd:decode": {"replicas": 2}}
    assert settings_digest(a) == settings_digest({"raypd:decode": {"replicas": 1}})
    assert settings_digest(a) != settings_digest(b)
    assert report_staleness("preflight", settings_digest(a), settings_digest(a)) is None
    assert report_staleness("preflight", settings_digest(a), settings_digest(b)) == STALE_PREFLIGHT
    assert report_staleness("verify", None, settings_digest(b)) is None  # stored by an older raypd
