"""The Conformance tab and API: serve.conformance against a real deployment is a job (operation
`conformance`, one at a time), its Contract 7 report is kept and drawn as a matrix (the PD verdict,
the reference's when one was given, the evidence, the first temperature-0 divergence), an offline plan
is told plainly that there is nothing to check, a reference is refused naming the field, and the
deployments' API key reaches no event, page, stored report or answer.

Most tests replace the run with `run_fn` (as the Benchmark tab's tests do); the last drives the real
`run_features` through the Kubernetes stand-in's service proxy to the vLLM-shaped stand-in server.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Optional

import pytest

from components.config.checks import Report as CheckReport
from serve.conformance.features import Outcome, Verdict
from serve.conformance.groups import FEATURE_IDS
from serve.conformance.report import FeatureResult, Report
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job

# Keys without raypd's `rpd_` shape: webui.redact would catch that shape anyway, and the job must
# not depend on it (an endpoint's key need not be one raypd made).
API_KEY = "Conf0rmanceKey" * 3
REF_KEY = "Ref3renceKey" * 3
KUBECONFIG = "apiVersion: v1\nusers: [{name: u, user: {token: kube-conf-secret-7373}}]\n"
VERDICTS = ("pass", "differs", "unsupported", "fail", "skip")
# the reference's verdict per feature: never the PD verdict, so a column showing the wrong one shows
REFERENCE_OF = {"pass": "fail", "differs": "pass", "unsupported": "pass", "fail": "skip", "skip": "unsupported"}


def _report(reference: Optional[str], evidence_extra: str = "") -> Report:
    results = []
    for verdict in VERDICTS:
        data: dict[str, Any] = {}
        if verdict == "differs":
            data = {"first_divergence": 7, "unit": "token", "ours": "cache decode", "theirs": "cache prefill"}
        results.append(FeatureResult(
            f"demo.{verdict}", "demo", f"a feature that is {verdict}",
            Outcome(Verdict(verdict), f"{verdict} evidence{evidence_extra}", data),
            Outcome(Verdict(REFERENCE_OF[verdict]), "theirs") if reference else None))
    return Report(endpoint="http://ray-llm-serve-svc.inference.svc:8000", model="qwen3.5-9b",
                  results=tuple(results), reference=reference, started="2025-01-01T00:00:00+00:00", seconds=1.5,
                  versions={"openai": "9.9.9"})


def fake_run(calls: list[dict[str, Any]], evidence_extra: str = "", gate: Optional[threading.Event] = None):
    def run(target, reference, on_result) -> Report:
        calls.append({"target": target, "reference": reference})
        if gate is not None:
            assert gate.wait(PATIENCE_S)
        report = _report("http://ref" if reference else None, evidence_extra)
        for result in report.results:
            on_result(result)
        return report

    return run


@pytest.fixture
def live(fake_app, fake_engine):
    """Two deployed real deployments serving the same model: `live`, and `colo` to compare with."""
    state = fake_app.extensions["raypd"]
    state.service.checker.verify_fn = lambda outputs, kubeconfig: CheckReport.of("verify", [])
    outputs = {
        "live": {"modelId": "qwen3.5-9b", "kubeconfig": KUBECONFIG, "apiKey": API_KEY, "namespace": "inference"},
        "colo": {"modelId": "qwen3.5-9b", "kubeconfig": KUBECONFIG, "apiKey": REF_KEY, "namespace": "inference"},
    }
    fake_engine.live_outputs = lambda stack: outputs.get(stack)
    client = fake_app.test_client()
    for name in ("live", "colo"):
        create(client, name)
        up = client.post(f"/api/v1/deployments/{name}/up", headers=AUTH)
        assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    return client, state


def _start(client, name: str, body: dict[str, Any], status: int = 202) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{name}/conformance", json=body, headers=AUTH)
    assert response.status_code == status, response.get_json()
    return response.get_json()


def _events(client, job_id: str) -> str:
    return client.get(f"/api/v1/jobs/{job_id}/events", headers=AUTH).get_data(as_text=True)


def test_an_offline_plan_gets_a_plain_statement_no_button_and_no_matrix(client):
    create(client, "plan")
    login(client)
    page = text_of(client.get("/deployments/plan/conformance"))
    assert 'id="tab-conformance" aria-current="page"' in page
    assert 'id="conformance-unavailable"' in page and "no OpenAI endpoint to check" in page
    assert "Offline engine" in page or "offline" in page.lower()
    assert 'id="run-conformance"' not in page and 'id="conformance-matrix"' not in page
    refused = client.post("/api/v1/deployments/plan/conformance", json={}, headers=AUTH)
    assert refused.status_code == 409
    assert refused.get_json()["errors"][0]["field"] == "deployment"
    assert "no OpenAI endpoint to check" in refused.get_json()["errors"][0]["message"]
    posted = client.post("/deployments/plan/conformance", data={"csrf_token": extract_csrf(page)})
    assert posted.status_code == 302 and "no OpenAI endpoint" in text_of(client.get(posted.headers["Location"]))
    assert client.get("/api/v1/deployments/plan/conformance", headers=AUTH).status_code == 404
    assert [j for j in client.get("/api/v1/deployments/plan", headers=AUTH).get_json()["jobs"]
            if j["operation"] == "conformance"] == []


def test_a_run_with_a_reference_is_a_job_its_report_kept_and_drawn_as_the_matrix(live):
    client, state = live
    calls: list[dict[str, Any]] = []
    state.conformance.conformer.run_fn = fake_run(calls)
    job = wait_for_job(client, _start(client, "live", {"reference": "colo"})["job"])
    assert job["status"] == "succeeded" and job["operation"] == "conformance"
    assert job["progress"]["total"] == len(FEATURE_IDS)  # every feature serve.conformance has
    # the job got both deployments' outputs with their secrets, and the kubeconfig, as verify does
    target, reference = calls[0]["target"], calls[0]["reference"]
    assert target.name == "live" and target.outputs["apiKey"] == API_KEY and target.kubeconfig == KUBECONFIG
    assert reference.name == "colo" and reference.outputs["apiKey"] == REF_KEY
    # the deployment is as it was
    assert client.get("/api/v1/deployments/live", headers=AUTH).get_json()["status"] == "deployed"
    events = _events(client, job["id"])
    assert "demo.fail: fail (reference: skip): fail evidence" in events

    last = client.get("/api/v1/deployments/live/conformance", headers=AUTH).get_json()
    assert last["id"] == job["id"] and last["reference"] == "colo" and last["deployment"] == "live"
    assert last["report"]["schemaVersion"] == 1 and last["report"]["counts"] == {v: 1 for v in VERDICTS}

    login(client)
    page = text_of(client.get("/deployments/live/conformance"))
    assert 'id="conformance-reference">colo<' in page and "<th>Reference</th>" in page
    for verdict in VERDICTS:
        row = page.split(f'id="feature-demo-{verdict}"', 1)[1].split("</tr>", 1)[0]
        pd_cell = row.split('class="verdict-pd"', 1)[1].split("</td>", 1)[0]
        ref_cell = row.split('class="verdict-ref"', 1)[1].split("</td>", 1)[0]
        assert f">{verdict}</span>" in pd_cell, row
        assert f">{REFERENCE_OF[verdict]}</span>" in ref_cell, row
        assert f"{verdict} evidence" in row
    assert 'id="conformance-divergence"' in page and "token 7" in page and "cache prefill" in page
    assert "Report schema version 1" in page and "openai client 9.9.9" in page
    assert '<option value="colo" selected>' in page  # the next run is asked as the last was


def test_without_a_reference_there_is_no_reference_column(live):
    client, state = live
    state.conformance.conformer.run_fn = fake_run([])
    job = wait_for_job(client, _start(client, "live", {})["job"])
    assert job["status"] == "succeeded"
    login(client)
    page = text_of(client.get("/deployments/live/conformance"))
    assert 'id="conformance-matrix"' in page and 'id="conformance-no-reference"' in page
    assert "<th>Reference</th>" not in page and 'class="verdict-ref"' not in page
    assert client.get("/api/v1/deployments/live/conformance", headers=AUTH).get_json()["reference"] is None


def test_the_page_button_starts_a_run_with_the_chosen_reference(live):
    client, state = live
    calls: list[dict[str, Any]] = []
    state.conformance.conformer.run_fn = fake_run(calls)
    login(client)
    page = text_of(client.get("/deployments/live/conformance"))
    assert 'id="run-conformance"' in page and '<option value="colo">colo</option>' in page
    assert 'id="no-conformance"' in page
    posted = client.post("/deployments/live/conformance", data={"csrf_token": extract_csrf(page), "reference": "colo"})
    assert posted.status_code == 302
    job_id = posted.headers["Location"].split("job=")[1]
    assert wait_for_job(client, job_id)["status"] == "succeeded" and calls[0]["reference"].name == "colo"


def test_a_second_run_while_one_runs_is_a_conflict(live):
    client, state = live
    gate = threading.Event()
    state.conformance.conformer.run_fn = fake_run([], gate=gate)
    first = _start(client, "live", {})["job"]
    busy = _start(client, "live", {}, status=409)
    assert busy["job"] == first and busy["errors"][0]["field"] == "job"
    gate.set()
    assert wait_for_job(client, first)["status"] == "succeeded"


@pytest.mark.parametrize(("body", "status", "words"), [
    ({"reference": "nope"}, 400, "there is no deployment named nope"),
    ({"reference": "live"}, 400, "is this deployment itself"),
    ({"reference": "<script>alert(1)</script>"}, 400, "must be the name of another deployment"),
    ({"reference": 7}, 400, "must be the name of another deployment"),
    ({"bogus": True}, 400, "unknown key; allowed: reference"),
])
def test_a_bad_reference_is_refused_naming_the_field(live, body, status, words):
    client, _ = live
    refused = _start(client, "live", body, status=status)
    field = "bogus" if "bogus" in body else "reference"
    assert refused["errors"][0]["field"] == field and words in refused["errors"][0]["message"]
    assert "<script>" not in json.dumps(refused)


def test_an_offline_or_other_model_reference_is_a_conflict_naming_the_reference(live, make_app, fake_app, tmp_path):
    client, state = live
    create(client, "other", {"raypd:model": {"id": "other-model"}})
    up = client.post("/api/v1/deployments/other/up", headers=AUTH)
    assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    refused = _start(client, "live", {"reference": "other"}, status=409)
    assert refused["errors"][0]["field"] == "reference" and "same model id" in refused["errors"][0]["message"]
    # an offline plan on the same store: nothing serves there to compare with
    offline = make_app(home=fake_app.extensions["raypd"].settings.home).test_client()
    create(offline, "plan")
    refused = _start(client, "live", {"reference": "plan"}, status=409)
    assert refused["errors"][0]["field"] == "reference" and "no OpenAI endpoint" in refused["errors"][0]["message"]
    login(client)
    page = text_of(client.get("/deployments/live/conformance"))
    assert '<option value="colo">' in page and 'value="other"' not in page and 'value="plan"' not in page


def test_the_api_key_reaches_no_event_page_stored_report_or_answer(live):
    client, state = live
    # an endpoint that quotes the keys back in its answers, as a careless gateway might
    state.conformance.conformer.run_fn = fake_run([], evidence_extra=f" (Authorization: x {API_KEY} / {REF_KEY})")
    job = wait_for_job(client, _start(client, "live", {"reference": "colo"})["job"])
    assert job["status"] == "succeeded"
    events = _events(client, job["id"])
    assert "fail evidence" in events
    answer = client.get("/api/v1/deployments/live/conformance", headers=AUTH).get_data(as_text=True)
    login(client)
    page = client.get("/deployments/live/conformance").get_data(as_text=True)
    stored = json.dumps(state.store.last_conformance("live"))
    for where in (events, answer, page, stored, json.dumps(client.get(f"/api/v1/jobs/{job['id']}",
                                                                      headers=AUTH).get_json())):
        assert API_KEY not in where and REF_KEY not in where and "kube-conf-secret" not in where


def test_a_failing_run_fails_the_job_with_the_reason_and_stores_nothing(live):
    client, state = live
    from serve.evidence import VerifyInputError

    def broken(target, reference, on_result):
        raise VerifyInputError(f"outputs lack kubeconfig (key {API_KEY})")

    state.conformance.conformer.run_fn = broken
    job = wait_for_job(client, _start(client, "live", {})["job"])
    assert job["status"] == "failed" and "cannot run conformance on live" in job["error"]
    assert API_KEY not in job["error"]
    assert client.get("/api/v1/deployments/live/conformance", headers=AUTH).status_code == 404
    assert client.get("/api/v1/deployments/live", headers=AUTH).get_json()["status"] == "deployed"


def test_the_real_run_features_through_the_service_proxy_to_stand_in_servers(fake_app, fake_engine):
    """The seam between the job and serve.conformance, real: the default Conformer builds each Session
    from the outputs' kubeconfig (the Kubernetes stand-in) and runs every feature through the Serve
    Service's proxy to a vLLM-shaped stand-in; the reference's stand-in answers another text at
    temperature 0, so the reference comparison differs and the page names the first divergence."""
    from tests.fakes.kube_api import FakeKubeApi
    from tests.fakes.vllm_openai import VllmStandIn

    state = fake_app.extensions["raypd"]
    state.service.checker.verify_fn = lambda outputs, kubeconfig: CheckReport.of("verify", [])
    client = fake_app.test_client()
    with FakeKubeApi("healthy") as kube, FakeKubeApi("healthy") as ref_kube, \
            VllmStandIn(kube.spec.model.id) as engines, VllmStandIn(ref_kube.spec.model.id, other_text=True) as ref:
        kube.serve_upstream, ref_kube.serve_upstream = engines.url, ref.url
        keyed = {"scope": "internet", "auth": "apiKey"}  # the gateway's keys: outputs carry apiKey with endpoint
        outputs = {"live": {**kube.outputs(), "endpoint": {"url": "https://llm.example.com/v1", **keyed},
                            "apiKey": API_KEY},
                   "colo": {**ref_kube.outputs(), "endpoint": {"url": "https://colo.example.com/v1", **keyed},
                            "apiKey": REF_KEY}}
        fake_engine.live_outputs = lambda stack: outputs.get(stack)
        for name in ("live", "colo"):
            create(client, name, {"raypd:model": {"id": kube.spec.model.id}})
            up = client.post(f"/api/v1/deployments/{name}/up", headers=AUTH)
            assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
        job = wait_for_job(client, _start(client, "live", {"reference": "colo"})["job"], timeout=4 * PATIENCE_S)
        proxied = [r["path"] for r in kube.requests]
    assert job["status"] == "succeeded", job.get("error")
    report = client.get("/api/v1/deployments/live/conformance", headers=AUTH).get_json()["report"]
    verdicts = {f["id"]: f["verdict"] for f in report["features"]}
    assert set(verdicts) == set(FEATURE_IDS)
    assert verdicts["chat.stream_usage"] == "pass" and verdicts["chat.stop"] == "pass"
    assert verdicts["reference.tokens_t0"] == "differs"
    assert any(p.endswith("-serve-svc:8000/proxy/v1/chat/completions") for p in proxied)
    assert API_KEY not in json.dumps(report) and REF_KEY not in json.dumps(report)
    login(client)
    page = text_of(client.get("/deployments/live/conformance"))
    assert 'id="conformance-divergence"' in page and "reference.tokens_t0" in page
