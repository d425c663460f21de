"""A web benchmark job down the real path: the app's default run function builds a Kubernetes client
from the stack's kubeconfig, creates the ConfigMap and Job, follows the pod and reads the results
back. The cluster is tests/fakes/kube_api.py on loopback, which runs the Job's command for real
against a local OpenAI-compatible server; so the requests, their timing and the event stream are
real, and only the cluster is pretend.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from components.config.checks import Report
from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.patience import until
from tests.web.support import AUTH, create, wait_for_job

NOTHING = {"configmaps": [], "jobs": [], "pods": []}


@pytest.fixture
def cluster(fake_app, fake_engine, monkeypatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setattr("serve.benchmark.incluster.POLL_SECONDS", 0.1)
    with FakeKubeApi("healthy") as kube:
        outputs = kube.outputs()
        with OpenAIServer(outputs["modelId"], ttft_s=0.01, itl_s=0.002, output_tokens=6) as openai:
            fake_engine.live = {**outputs, "openaiBaseUrl": openai.base_url}
            state = fake_app.extensions["raypd"]
            state.service.checker.verify_fn = lambda o, k: Report.of("verify", [])
            client = fake_app.test_client()
            create(client, "live")
            up = client.post("/api/v1/deployments/live/up", headers=AUTH).get_json()["job"]
            assert wait_for_job(client, up)["status"] == "succeeded"
            yield {"client": client, "kube": kube, "openai": openai, "state": state}


@pytest.mark.slow
def test_a_web_benchmark_runs_as_a_job_in_the_cluster_and_its_run_is_kept(cluster):
    client, kube, openai = cluster["client"], cluster["kube"], cluster["openai"]
    # SLOs no loaded machine misses (the stand-in answers in ~20 ms): this checks the SLOs reach the
    # run and goodput comes back, not how fast this machine is (goodput's rule: tests/unit).
    accepted = client.post("/api/v1/deployments/live/benchmarks", headers=AUTH, json={
        "rates": [20, 40], "requests": 20, "inputTokens": 16, "outputTokens": 6,
        "sloTtftMs": 60_000, "sloTpotMs": 10_000})
    job = wait_for_job(client, accepted.get_json()["job"], timeout=120)
    assert job["status"] == "succeeded", job["error"]
    assert job["progress"] == {"done": 40, "total": 40}
    run = client.get(f"/api/v1/benchmarks/{job['id']}", headers=AUTH).get_json()
    assert run["summary"]["requests"] == {"sent": 40, "completed": 40, "failed": 0}
    assert [p["rate"] for p in run["summary"]["sweep"]] == [20, 40]
    assert run["summary"]["slo"]["ttft_ms"] == 60_000 and run["summary"]["slo"]["attained"] == 1.0
    assert run["summary"]["goodput"]["rate"] == 40.0
    assert run["summary"]["usd_per_million_output_tokens"] > 0  # the deployment's cost came along
    assert len([r for r in openai.requests if r[1] == "/v1/chat/completions"]) == 40  # really sent
    lines = client.get(run["requestsUrl"], headers=AUTH).get_data(as_text=True).splitlines()
    assert len(lines) == 40
    assert kube.objects() == NOTHING  # the Job, its pod and the ConfigMap are gone
    (pod,) = kube.runs
    assert pod.process is not None and pod.process.returncode == 0
    events = client.get(f"/api/v1/jobs/{job['id']}/events", headers=AUTH).get_data(as_text=True)
    assert "req/s now" in events and "p50 TTFT" in events
    assert DEFAULT_TOKEN not in events and "BEGIN CERTIFICATE" not in events
    assert cluster["state"].service.get("live")["status"] == "deployed"


def test_cancel_deletes_the_job_and_kills_its_pod(cluster):
    client, kube = cluster["client"], cluster["kube"]
    cluster["openai"].ttft_s = 0.3  # slow answers, 120 s of them: only the cancel ends the run sooner
    job_id = client.post("/api/v1/deployments/live/benchmarks", headers=AUTH,
                         json={"rates": [1], "requests": 120, "outputTokens": 4}).get_json()["job"]
    until(lambda: kube.runs and kube.runs[0].process is not None, "the Job's pod to start")
    client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert wait_for_job(client, job_id)["status"] == "cancelled"
    assert kube.objects() == NOTHING and kube.runs[0].killed
    assert client.get("/api/v1/deployments/live/benchmarks", headers=AUTH).get_json() == {"runs": []}


def test_a_refused_job_fails_with_the_apis_words_and_leaves_no_config_map(cluster):
    client, kube = cluster["client"], cluster["kube"]
    kube.refuse_jobs = 403
    job = wait_for_job(client, client.post("/api/v1/deployments/live/benchmarks", headers=AUTH,
                                           json={"rates": [1], "requests": 2}).get_json()["job"])
    assert job["status"] == "failed" and job["error"].startswith("cannot create the benchmark Job:")
    assert "403" in job["error"] and kube.objects() == NOTHING


@pytest.mark.slow
def test_a_pod_that_cannot_start_fails_the_job_with_the_kubelets_reason(cluster):
    client, kube = cluster["client"], cluster["kube"]
    kube.job_waiting_reason = "InvalidImageName"
    job = wait_for_job(client, client.post("/api/v1/deployments/live/benchmarks", headers=AUTH,
                                           json={"rates": [1], "requests": 2}).get_json()["job"])
    assert job["status"] == "failed" and "InvalidImageName" in job["error"]
    assert kube.objects() == NOTHING


@pytest.mark.slow
def test_one_deployment_runs_one_benchmark_at_a_time(cluster):
    client = cluster["client"]
    cluster["openai"].ttft_s = 0.2
    first = client.post("/api/v1/deployments/live/benchmarks", headers=AUTH,
                        json={"rates": [5], "requests": 20, "outputTokens": 4}).get_json()["job"]
    second = client.post("/api/v1/deployments/live/benchmarks", headers=AUTH, json={"rates": [5]})
    assert second.status_code == 409 and second.get_json()["job"] == first
    client.post(f"/api/v1/jobs/{first}/cancel", headers=AUTH)
    assert wait_for_job(client, first)["status"] == "cancelled"


@pytest.mark.slow
def test_outputs_without_the_endpoint_fail_the_job_with_what_to_do(cluster, fake_engine):
    client, kube = cluster["client"], cluster["kube"]
    fake_engine.live = {key: value for key, value in fake_engine.live.items() if key != "openaiBaseUrl"}
    job = wait_for_job(client, client.post("/api/v1/deployments/live/benchmarks", headers=AUTH,
                                           json={"rates": [1], "requests": 2}).get_json()["job"])
    assert job["status"] == "failed"
    assert job["error"] == ("cannot benchmark from the stack's outputs: the outputs have no openaiBaseUrl (not "
                            "raypd stack outputs?); run Refresh or Deploy to bring them up to date")
    assert kube.objects() == NOTHING and [r for r in kube.requests if r["method"] == "POST"] == []
