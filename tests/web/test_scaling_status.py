"""The Scaling section through the web app (Flask test client): a real deployment's status answer
carries every phase's scaling read from the cluster (the Kubernetes stand-in, tests/fakes/kube_api.py),
valid against the API's own LiveStatus model, and the deployment page loads the script that draws it.
"""

from __future__ import annotations

import pytest

from tests.fakes.kube_api import FakeKubeApi
from tests.web.support import AUTH, create, login, wait_for_job

AUTOSCALED = {"raypd:decode": {"replicas": 1, "autoscaling": {
    "minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8}}}


@pytest.mark.slow  # Deploy's verify on the stand-in: about a minute on this machine
def test_a_real_deployments_status_has_the_scaling_of_every_phase(fake_app, fake_engine):
    client = fake_app.test_client()
    with FakeKubeApi("healthy", config=AUTOSCALED) as kube:
        decode = kube.deployment_names["decode"]
        kube.serve_overrides = {decode: {"status": "UPSCALING", "status_trigger": "AUTOSCALING",
                                         "message": "Upscaling from 1 to 2 replicas.", "target_num_replicas": 2,
                                         "replica_states": ["RUNNING", "STARTING"]}}
        kube.scaling_log = [f"INFO 2026-12-06 12:00:01,234 controller 1200 -- Upscaling Deployment(name='{decode}', "
                            "app='llm') from 1 to 2 replicas. Current ongoing requests: 9.20, current running "
                            "replicas: 1."]
        fake_engine.live = kube.outputs()
        create(client, "scaled", AUTOSCALED)
        response = client.post("/api/v1/deployments/scaled/up", headers=AUTH)
        wait_for_job(client, response.get_json()["job"])
        status = client.get("/api/v1/deployments/scaled/status", headers=AUTH).get_json()
        login(client)
        page = client.get("/deployments/scaled").get_data(as_text=True)
    scaling = status["scaling"]
    assert [p["phase"] for p in scaling["phases"]] == ["prefill", "decode"]
    d = scaling["phases"][1]
    assert (d["running"], d["starting"], d["target"], d["min"], d["max"]) == (1, 1, 2, 1, 3)
    assert d["decisions"][0]["reason"].startswith("Current ongoing requests: 9.20")
    assert scaling["decisionsSource"] == "Serve controller log (/serve/controller_1200.log)"
    assert "kubeconfig" not in str(scaling)
    assert 'id="live-status"' in page and "app.js" in page and "/api/v1/deployments/scaled/status" in page
