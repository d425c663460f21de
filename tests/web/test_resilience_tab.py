"""The Resilience tab and API (issue 31 §2): a fault injected into a LIVE deployment only after its
name is typed, as a job with phases, cancelled without leaving a node cordoned, its Contract 8 report
stored and shown (WRONG answers counted, the timeline a PNG), an offline plan told plainly that there
is nothing to disrupt, and no credential on a page, in an event or in the store.

The cluster is replaced by `connect_fn` (the harness): serve.resilience's real `measure` runs against
the OpenAI stand-in (tests/fakes/openai_server.py) with a fault of the test's own; the Kubernetes
faults have their own tests (tests/unit/test_resilience_faults.py)."""

from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

from components.config.checks import Report
from serve.kv_evidence import KvReading
from serve.resilience.golden import Workload
from tests.fakes.openai_server import OpenAIServer
from tests.patience import until
from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job
from webui.resilience_runs import Harness

KUBECONFIG_SECRET = "apiVersion: v1\nusers: [{name: u, user: {token: kube-res-secret-7373}}]\n"
API_KEY_SECRET = "sk-endpoint-res-secret-9191"
OUTAGE_S = 0.6


class Ready:
    def describe(self) -> str:
        return "the stand-in"

    def ready(self) -> Optional[bool]:
        return True

    def kv_reading(self) -> Optional[KvReading]:
        return None


class WrongThenRight:
    """Answers come back 200 but different from the golden ones for OUTAGE_S: WRONG answers."""

    name = "decode-pod"

    def __init__(self, server: OpenAIServer):
        self.server, self.original = server, server.reply

    def choose(self) -> str:
        return "pod inference/decode-0"

    def inject(self) -> str:
        self.server.reply = "a different answer entirely, nothing like the golden one"
        threading.Timer(OUTAGE_S, lambda: setattr(self.server, "reply", self.original)).start()
        return "deleted pod inference/decode-0"

    def restore(self) -> None:
        self.server.reply = self.original


class Cordon:
    """A node fault that never recovers (every request fails after it) until restored."""

    name = "node"

    def __init__(self, server: OpenAIServer):
        self.server = server
        self.cordoned = False
        self.interrupted = False
        self.restored = 0

    def choose(self) -> str:
        return "node gpu-1"

    def inject(self) -> str:
        self.cordoned = True
        self.server.failure_rate = 1.0
        return "cordoned node gpu-1, evicted decode-0"

    def interrupt(self) -> None:
        self.interrupted = True

    def restore(self) -> None:
        self.restored += 1
        self.cordoned = False
        self.server.failure_rate = 0.0


@pytest.fixture
def server():
    with OpenAIServer("qwen3.5-9b") as running:
        yield running


@pytest.fixture
def live(fake_app, fake_engine, server):
    """A "deployed" real deployment named `live`, its resilience service wired to the stand-in."""
    state = fake_app.extensions["raypd"]
    state.service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
    fake_engine.live = {"modelId": "qwen3.5-9b", "kubeconfig": KUBECONFIG_SECRET, "namespace": "inference",
                        "apiKey": API_KEY_SECRET}
    client = fake_app.test_client()
    create(client, "live")
    up = client.post("/api/v1/deployments/live/up", headers=AUTH)
    assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    res = state.resilience.resilience
    res.fault_at_s, res.settle_s, res.bucket_s, res.ready_every_s = 1.0, 1.0, 0.5, 0.2
    res.workload = Workload(prompts=3, input_tokens=5, max_tokens=4)
    seen: dict[str, Any] = {}

    def use(fault_type):
        def connect(outputs, kubeconfig, fault):
            seen.update(outputs=outputs, kubeconfig=kubeconfig, fault=fault)
            seen["fault_obj"] = fault_type(server)
            return Harness(server.url, "qwen3.5-9b", seen["fault_obj"], Ready())
        res.connect_fn = connect

    return client, state, seen, use


def _start(client, name: str, body: dict[str, Any], status: int = 202):
    response = client.post(f"/api/v1/deployments/{name}/resilience", json=body, headers=AUTH)
    assert response.status_code == status, response.get_json()
    return response.get_json()


def _jobs(client, name: str) -> list[dict[str, Any]]:
    return [j for j in client.get(f"/api/v1/deployments/{name}", headers=AUTH).get_json()["jobs"]
            if j["operation"] == "resilience"]


def test_an_offline_plan_has_no_form_and_the_api_says_why(client):
    create(client, "plan")
    login(client)
    page = text_of(client.get("/deployments/plan/resilience"))
    assert 'id="resilience-unavailable"' in page and "nothing is serving, so there is nothing to disrupt" in page
    assert 'id="resilience-form"' not in page and 'id="tab-resilience"' in page
    refused = _start(client, "plan", {"fault": "node", "confirm": "plan"}, 409)
    assert refused["errors"][0]["field"] == "deployment" and "offline plan" in refused["errors"][0]["message"]
    assert _jobs(client, "plan") == []
    assert client.get("/api/v1/deployments/plan/resilience", headers=AUTH).get_json() == {"runs": []}


@pytest.mark.parametrize("confirm", [None, "", "LIVE", "Live", "other", " live", "live\n", "<script>x</script>",
                                     "live'; DROP TABLE jobs; --"])
def test_nothing_starts_without_the_deployment_name_typed_exactly(live, confirm):
    client, state, seen, use = live
    use(WrongThenRight)
    create(client, "other")
    body: dict[str, Any] = {"fault": "decode-pod"}
    if confirm is not None:
        body["confirm"] = confirm
    refused = _start(client, "live", body, 400)
    assert [e["field"] for e in refused["errors"]] == ["confirm"]
    if confirm is not None:
        assert "type the deployment's name, live, exactly" in refused["errors"][0]["message"]
        assert "<script>" not in refused["errors"][0]["message"]
    assert _jobs(client, "live") == [] and seen == {}


def test_the_form_refuses_a_wrong_confirmation_naming_the_field_and_not_echoing_it(live):
    client, state, seen, use = live
    use(WrongThenRight)
    login(client)
    page = text_of(client.get("/deployments/live/resilience"))
    assert "This disrupts the LIVE deployment live" in page and "deletes a pod" in page
    posted = client.post("/deployments/live/resilience", data={
        "csrf_token": extract_csrf(page), "fault": "decode-pod", "rate": "2", "durationSeconds": "60",
        "confirm": "<b>hostile</b>"})
    assert posted.status_code == 400
    shown = posted.get_data(as_text=True)
    assert 'id="error-confirm"' in shown and "<b>hostile</b>" not in shown and "&lt;b&gt;hostile" not in shown
    no_csrf = client.post("/deployments/live/resilience", data={"fault": "decode-pod", "confirm": "live"})
    assert no_csrf.status_code in (400, 403)
    assert _jobs(client, "live") == [] and seen == {}


def test_the_body_is_strict_and_uses_the_clis_limits(live):
    client, state, seen, use = live
    use(WrongThenRight)
    fields = lambda body: [e["field"] for e in _start(client, "live", body, 400)["errors"]]  # noqa: E731
    assert fields({"fault": "decode-pod", "confirm": "live", "bogus": 1}) == ["bogus"]
    assert fields({"fault": "disk", "confirm": "live"}) == ["fault"]
    assert fields({"fault": "node", "confirm": "live", "rate": 1001}) == ["rate"]
    assert fields({"fault": "node", "confirm": "live", "durationSeconds": 6 * 3600 + 1}) == ["durationSeconds"]
    assert fields({"fault": "node", "confirm": "live", "durationSeconds": 30}) == ["durationSeconds"]  # fault at 30 s
    assert fields({"fault": "node", "confirm": "live", "rate": "2"}) == ["rate"]
    assert _jobs(client, "live") == []


def test_a_run_reports_phases_stores_the_report_and_shows_wrong_answers_without_secrets(live, server):
    client, state, seen, use = live
    use(WrongThenRight)
    accepted = _start(client, "live", {"fault": "decode-pod", "rate": 10, "durationSeconds": 60, "confirm": "live"})
    job = wait_for_job(client, accepted["job"])
    assert job["status"] == "succeeded", job
    assert job["operation"] == "resilience" and job["progress"] == {"done": 5, "total": 5}
    assert seen["kubeconfig"] == KUBECONFIG_SECRET and seen["fault"] == "decode-pod"  # as verify gets them
    events = client.get(f"/api/v1/jobs/{job['id']}/events", headers={**AUTH, "Accept": "application/json"})
    text = events.get_data(as_text=True)
    for phase in ("golden:", "load:", "fault injected:", "recovering:", "done:"):
        assert phase in text
    runs = client.get("/api/v1/deployments/live/resilience", headers=AUTH).get_json()["runs"]
    assert [run["id"] for run in runs] == [job["id"]]
    report = runs[0]["report"]
    assert report["kind"] == "resilience" and report["requests"]["wrong"] > 0
    assert runs[0]["settings"] == {"fault": "decode-pod", "rate": 10.0, "durationSeconds": 60.0,
                                   "faultAtSeconds": 1.0}
    login(client)
    page = text_of(client.get("/deployments/live/resilience"))
    assert f'id="wrong-answers">{report["requests"]["wrong"]}<' in page
    assert 'id="time-to-recover"' in page and 'id="resilience-plot"' in page
    plot = client.get(runs[0]["plotUrl"])
    assert plot.status_code == 200 and plot.mimetype == "image/png" and plot.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get("/resilience/nope/timeline.png").status_code == 404
    stored = state.store.resilience_run(job["id"])
    for secret in ("kube-res-secret-7373", API_KEY_SECRET):
        assert secret not in page and secret not in text and secret not in str(stored)


def test_one_at_a_time_and_not_beside_another_operation(live, server):
    client, state, seen, use = live
    use(Cordon)  # never recovers: the run lasts until cancelled
    first = _start(client, "live", {"fault": "node", "rate": 5, "durationSeconds": 120, "confirm": "live"})
    for path, body in (("resilience", {"fault": "node", "confirm": "live"}), ("benchmarks", {"rates": [1]}),
                       ("up", {})):
        busy = client.post(f"/api/v1/deployments/live/{path}", json=body, headers=AUTH)
        assert busy.status_code == 409, (path, busy.get_json())
    assert client.post(f"/api/v1/jobs/{first['job']}/cancel", headers=AUTH).status_code in (200, 202)
    assert wait_for_job(client, first["job"])["status"] == "cancelled"


def test_cancel_stops_the_load_and_uncordons_the_node(live, server):
    client, state, seen, use = live
    use(Cordon)
    accepted = _start(client, "live", {"fault": "node", "rate": 10, "durationSeconds": 120, "confirm": "live"})
    until(lambda: "fault_obj" in seen and seen["fault_obj"].cordoned, "the node cordoned")
    fault = seen["fault_obj"]
    assert client.post(f"/api/v1/jobs/{accepted['job']}/cancel", headers=AUTH).status_code in (200, 202)
    job = wait_for_job(client, accepted["job"])
    assert job["status"] == "cancelled"
    assert fault.interrupted and fault.restored >= 1 and not fault.cordoned
    # The load would have gone on for 120 s (it never recovers); the job ended within PATIENCE_S of
    # the cancel, so the load stopped then (wait_for_job fails otherwise).
    assert state.store.resilience_runs("live") == []  # a cancelled run reports nothing
