"""Preflight and verify in the web app: jobs with Contract 5 results, launch blocked by a failed
preflight unless forced, the last report of each kind, and the live status.

The preflight is the real one (no AWS credentials in tests, so its AWS checks say `skip` and the
GPU memory fit decides); verify on a "real" deployment goes through the fake engine's outputs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.config.checks import PREFLIGHT_IDS, VERIFY_IDS, Check, Report
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job
from webui.deployments.errors import FORCE_LABEL

TOO_BIG = {"raypd:model": {"id": "qwen3-32b", "source": "Qwen/Qwen3-32B"}}  # 64 GB of bf16 on one L4
KUBECONFIG_SECRET = "apiVersion: v1\nusers: [{name: u, user: {token: kube-secret-token-4242}}]\n"


def _start(client, name: str, operation: str, body: Any = None) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{name}/{operation}", json=body, headers=AUTH)
    assert response.status_code == 202, response.get_json()
    return wait_for_job(client, response.get_json()["job"])


def test_preflight_job_result_is_a_contract_5_report(client):
    create(client, "demo")
    job = _start(client, "demo", "preflight")
    assert job["status"] == "succeeded" and job["operation"] == "preflight"
    report = job["result"]
    assert report["kind"] == "preflight" and report["ok"] is True
    assert [c["id"] for c in report["checks"]] == list(PREFLIGHT_IDS)
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["aws-credentials"]["status"] == "skip"  # no credentials here: said, not passed
    assert by_id["gpu-memory-fit"]["status"] == "pass"  # the reference fits one L4
    assert job["progress"] == {"done": len(PREFLIGHT_IDS), "total": len(PREFLIGHT_IDS)}

    checks = client.get("/api/v1/deployments/demo/checks", headers=AUTH).get_json()
    assert checks["verify"] is None
    assert checks["preflight"]["job"] == job["id"]
    assert checks["preflight"]["checks"] == report["checks"]
    assert client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["status"] == "created"


def test_failed_preflight_blocks_launch_and_nothing_is_planned(client):
    create(client, "big", TOO_BIG)
    job = _start(client, "big", "up")
    assert job["status"] == "failed"
    assert "preflight failed (gpu-memory-fit)" in job["error"] and "force" in job["error"]
    fit = {c["id"]: c for c in job["reports"]["preflight"]["checks"]}["gpu-memory-fit"]
    assert fit["status"] == "fail" and fit["remedy"]
    deployment = client.get("/api/v1/deployments/big", headers=AUTH).get_json()
    assert deployment["status"] == "created"  # nothing ran: not "up failed"
    assert deployment["outputs"] is None and deployment["resources"] is None
    assert client.get("/api/v1/deployments/big/checks", headers=AUTH).get_json()["preflight"]["ok"] is False


def test_force_launches_despite_a_failed_preflight_and_says_so(client, app):
    create(client, "big", TOO_BIG)
    job = _start(client, "big", "up", {"force": True})
    assert job["status"] == "succeeded"
    assert job["reports"]["preflight"]["ok"] is False
    events = client.get(f"/api/v1/jobs/{job['id']}/events", headers=AUTH).get_data(as_text=True)
    assert "launching despite a failed preflight (force): gpu-memory-fit" in events
    audit = app.extensions["raypd"].store.audit_entries()
    assert any(a["action"] == "up requested" and "(force)" in (a["detail"] or "") for a in audit)


def test_preview_runs_the_preflight_but_is_not_blocked_by_it(client):
    create(client, "big", TOO_BIG)
    job = _start(client, "big", "preview")
    assert job["status"] == "succeeded"
    assert job["reports"]["preflight"]["ok"] is False


@pytest.mark.slow
def test_verify_of_an_offline_deployment_skips_every_check_and_says_why(client):
    create(client, "demo")
    _start(client, "demo", "up")
    job = _start(client, "demo", "verify")
    report = job["result"]
    assert [c["id"] for c in report["checks"]] == list(VERIFY_IDS)
    assert {c["status"] for c in report["checks"]} == {"skip"}
    assert all("nothing was created in AWS" in c["detail"] for c in report["checks"])
    status = client.get("/api/v1/deployments/demo/status", headers=AUTH).get_json()
    assert status["available"] is False and "nothing was created in AWS" in status["reason"]
    assert client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["status"] == "planned (offline)"


def test_real_up_ends_with_verify_on_the_live_outputs_and_no_secret_leaks(fake_app, fake_engine):
    client = fake_app.test_client()
    service = fake_app.extensions["raypd"].service
    seen: list[tuple[dict[str, Any], Any]] = []

    def verify(outputs: dict[str, Any], kubeconfig: Any) -> Report:
        seen.append((outputs, kubeconfig))
        return Report.of("verify", [
            Check.passed("gpu-nodes", "GPU nodes", "2 of 2 Ready"),
            Check.failed("nixl-backend", "NIXL backend", "Backend UCX was instantiated on decode",
                         "set kvTransfer.backend LIBFABRIC"),
        ])

    service.checker.verify_fn = verify
    fake_engine.live = {"modelId": "qwen3.5-9b", "kubeconfig": KUBECONFIG_SECRET}
    create(client, "real")
    job = _start(client, "real", "up")
    assert job["status"] == "succeeded"
    assert seen and seen[0][1] == KUBECONFIG_SECRET  # verify got the kubeconfig...
    assert job["reports"]["verify"]["ok"] is False  # ...and its finding is part of the job
    assert job["reports"]["preflight"]["ok"] is True
    checks = client.get("/api/v1/deployments/real/checks", headers=AUTH).get_json()
    assert checks["verify"]["checks"][1]["detail"].startswith("Backend UCX")
    answers = [client.get(path, headers=AUTH).get_data(as_text=True) for path in (
        "/api/v1/deployments/real", "/api/v1/deployments/real/checks", f"/api/v1/jobs/{job['id']}",
        f"/api/v1/jobs/{job['id']}/events")]
    assert not any("kube-secret-token-4242" in answer for answer in answers)


@pytest.mark.slow
def test_live_status_of_a_real_deployment_is_read_once_per_interval(fake_app, fake_engine):
    client = fake_app.test_client()
    service = fake_app.extensions["raypd"].service
    calls: list[Any] = []

    def status(outputs: dict[str, Any], kubeconfig: Any) -> dict[str, Any]:
        calls.append(kubeconfig)
        return {"nodes": [{"name": "ip-10-0-1-5", "ready": True}], "rayService": {"ready": True}}

    service.checker.status_fn = status
    service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
    fake_engine.live = {"kubeconfig": KUBECONFIG_SECRET}
    create(client, "real")
    before = client.get("/api/v1/deployments/real/status", headers=AUTH).get_json()
    assert before == {"available": False, "reason": "not deployed yet: run Deploy first"}
    _start(client, "real", "up")
    first = client.get("/api/v1/deployments/real/status", headers=AUTH).get_json()
    second = client.get("/api/v1/deployments/real/status", headers=AUTH).get_json()
    assert first["available"] is True and first["nodes"][0]["name"] == "ip-10-0-1-5"
    assert second == first and len(calls) == 1
    assert "kube-secret-token-4242" not in str(first)


def test_a_check_job_is_refused_while_another_job_runs(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "busy")
    fake_engine.gate.clear()
    running = client.post("/api/v1/deployments/busy/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    for operation in ("preflight", "verify"):
        refused = client.post(f"/api/v1/deployments/busy/{operation}", headers=AUTH)
        assert refused.status_code == 409 and refused.get_json()["job"] == running
    fake_engine.gate.set()
    assert wait_for_job(client, running)["status"] == "succeeded"


@pytest.mark.parametrize("path", ["/checks", "/status"])
def test_check_reads_of_a_missing_deployment_are_404(client, path):
    response = client.get(f"/api/v1/deployments/nope{path}", headers=AUTH)
    assert response.status_code == 404 and response.get_json()["errors"][0]["field"] == "name"


def test_checks_of_a_torn_down_deployment_do_not_come_back_with_its_name(client):
    create(client, "again")
    _start(client, "again", "preflight")
    destroyed = client.delete("/api/v1/deployments/again", headers=AUTH)
    assert wait_for_job(client, destroyed.get_json()["job"])["status"] == "succeeded"
    create(client, "again")
    assert client.get("/api/v1/deployments/again/checks", headers=AUTH).get_json() == {
        "preflight": None, "verify": None}


# ---- pages ----

def _form(page: str, **overrides: str) -> dict[str, str]:
    from tests.web.support import form_defaults

    return form_defaults(page) | {"csrf_token": extract_csrf(page), **overrides}


@pytest.mark.slow
def test_new_deployment_preview_shows_the_preflight_and_launch_needs_force(app):
    browser = app.test_client()
    login(browser)
    page = text_of(browser.get("/deployments/new"))
    values = _form(page, name="big", **{"raypd:model.id": "qwen3-32b", "raypd:model.source": "Qwen/Qwen3-32B"})
    preview = browser.post("/deployments/new", data=values | {"action": "preview"})
    html = text_of(preview)
    assert preview.status_code == 200
    assert 'id="preflight-report"' in html and 'data-ok="0"' in html
    assert 'data-check="gpu-memory-fit"' in html and "Fix:" in html
    assert 'id="force-launch"' in html

    refused = browser.post("/deployments/new", data=values | {"action": "launch"})
    assert refused.status_code == 409 and 'id="launch-blocked"' in text_of(refused)
    assert browser.get("/api/v1/deployments/big").status_code == 404  # nothing half-created

    launched = browser.post("/deployments/new", data=values | {"action": "launch", "force": "1"})
    assert launched.status_code == 302
    job_id = launched.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"


def test_deployment_page_has_status_panel_and_verify_button(app):
    browser = app.test_client()
    login(browser)
    create(browser, "demo")
    page = text_of(browser.get("/deployments/demo"))
    assert 'id="status"' in page and 'id="verify-now"' in page
    assert "No verify report yet." in page
    verify = browser.post("/deployments/demo/verify", data={"csrf_token": extract_csrf(page)})
    assert verify.status_code == 302
    job_id = verify.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"
    after = text_of(browser.get("/deployments/demo"))
    # The report shows once (issue 29 §2): with the job that made it; the Status panel points there.
    assert 'id="job-verify-report"' in after and after.count('data-check="kv-transfer"') == 1
    assert 'id="verify-report-above"' in after and 'id="verify-report"' not in after
    assert "No verify report yet." not in after
    # Shown with another job, the Status panel has the report itself.
    preflight = browser.post("/deployments/demo/preflight", data={"csrf_token": extract_csrf(after)})
    wait_for_job(browser, preflight.headers["Location"].split("job=")[1], headers={})
    later = text_of(browser.get("/deployments/demo"))
    assert 'id="verify-report"' in later and later.count('data-check="kv-transfer"') == 1
    assert 'id="preflight-report-above"' in later and later.count('data-check="gpu-memory-fit"') == 1


# ---- the real verify and live status, through a Kubernetes API on loopback ----

@pytest.mark.slow
@pytest.mark.parametrize("scenario,failing", [("healthy", set()), ("ucx-fallback", {"nixl-backend"})])
def test_verify_after_a_real_up_reads_the_cluster_through_the_kubernetes_api(
        fake_app, fake_engine, scenario, failing, tmp_path):
    from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi
    from tests.prometheus_server import prometheus_scraping

    client = fake_app.test_client()
    with FakeKubeApi(scenario) as kube, prometheus_scraping(kube, tmp_path / "prometheus"):
        fake_engine.live = kube.outputs()
        create(client, "real")
        job = _start(client, "real", "up")
        verify = job["reports"]["verify"]
        assert {c["id"] for c in verify["checks"] if c["status"] == "fail"} == failing
        assert verify["ok"] is (not failing)
        if scenario == "healthy":
            statuses = {c["id"]: c["status"] for c in verify["checks"]}
            assert statuses["kv-transfer"] == "pass" and statuses["nixl-backend"] == "pass"
        status = client.get("/api/v1/deployments/real/status", headers=AUTH).get_json()
        assert status["available"] is True
        assert len(status["nodes"]) == 2 and all(node["ready"] for node in status["nodes"])
        assert status["ready"]["status"] == "True"
        assert status["metrics"]["available"] is True and status["metrics"]["strip"]
        answers = client.get(f"/api/v1/jobs/{job['id']}", headers=AUTH).get_data(as_text=True)
        assert DEFAULT_TOKEN not in answers and DEFAULT_TOKEN not in str(status)


def test_checks_inside_a_deploy_do_not_overwrite_its_resource_progress(fake_app, fake_engine):
    client = fake_app.test_client()
    fake_app.extensions["raypd"].service.checker.verify_fn = lambda outputs, kubeconfig: Report.of(
        "verify", [Check.passed(i, i, "seen") for i in VERIFY_IDS])
    fake_engine.live = {"kubeconfig": KUBECONFIG_SECRET}
    create(client, "real")
    job = _start(client, "real", "up")
    events = fake_app.extensions["raypd"].store.events_after(job["id"])
    planned = next(e["total"] for e in events if "etaSeconds" in e)  # the plan's resources
    assert planned != len(VERIFY_IDS)
    assert job["progress"] == {"done": planned, "total": planned}  # resources, not the 10 checks


@pytest.mark.slow
def test_every_deploy_button_offers_the_box_its_refusal_names(app):
    # Issue 29 §2: the pending box's Deploy failed and pointed to a "Launch anyway" that was not there,
    # and the box beside the head's Deploy read only "anyway".
    browser = app.test_client()
    login(browser)
    create(browser, "big")
    assert wait_for_job(browser, browser.post("/api/v1/deployments/big/up", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    browser.patch("/api/v1/deployments/big", json={"config": TOO_BIG}, headers=AUTH)
    page = text_of(browser.get("/deployments/big"))
    refused = browser.post("/deployments/big/up", data={"csrf_token": extract_csrf(page)})
    job = wait_for_job(browser, refused.headers["Location"].split("job=")[1], headers={})
    assert job["status"] == "failed" and f"tick “{FORCE_LABEL}” beside Deploy" in job["error"]
    page = text_of(browser.get("/deployments/big"))
    for box, button in (("force-up", "op-up"), ("force-pending-deploy", "pending-deploy")):
        assert re.search(rf'<input type="checkbox" name="force" value="1" id="{box}" data-guards="{button}"> '
                         rf'{re.escape(FORCE_LABEL)}</label>', page), box
    forced = browser.post("/deployments/big/up", data={"csrf_token": extract_csrf(page), "force": "1"})
    assert wait_for_job(browser, forced.headers["Location"].split("job=")[1], headers={})["status"] == "succeeded"
