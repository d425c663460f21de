"""The OpenAPI document against real answers: every answer of a realistic flow must validate
against the schema the document gives for its path, method and status, and every documented
status must be met at least once.

The document is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, so jsonschema checks them
exactly (no nullable translation). Two engines drive the flow: the offline engine (the real plan
in a subprocess) and the fake "real" engine of tests/web/support.py (busy jobs, pending
operations, live status, a verify report); an app without the fake engine answers 503 for the
deployments it made.
"""

from __future__ import annotations

import json
from typing import Any, Optional

import pytest
from flask import Flask
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator

from components.config.checks import Check, Report
from serve.benchmark.events import RunResult
from serve.benchmark.summary import summarize
from serve.evidence import VerifyInputError
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, FakeEngine, wait_for_job

PREFIX = "/api/v1"
METHODS = ("get", "post", "put", "patch", "delete")
PENDING = [{"urn": "urn:pulumi:live::raypd::eks:index:Cluster::cluster-eks", "type": "eks:index:Cluster",
            "name": "cluster-eks", "operation": "creating",
            "check": "EKS console > Clusters: a cluster named raypd-live"}]
# What serve.live_status.cluster_status answers for a running deployment (its keys and types).
LIVE = {
    "namespace": "inference", "rayService": "raypd-llm",
    "nodes": [{"name": "ip-10-0-1-5", "ready": True, "zone": "us-east-2a", "instanceType": "g6.8xlarge",
               "nodeGroup": "gpu-prefill", "eksNodeGroup": "prefill", "gpus": 1, "efa": 0}],
    "rayPods": [{"name": "raypd-llm-prefill-abc", "group": "prefill", "phase": "prefill",
                 "node": "ip-10-0-1-5", "status": "Running"}],
    "ready": {"status": "True", "reason": "RayServiceReady", "message": None},
    "serveApplication": {"name": "llm", "status": "RUNNING", "message": None,
                         "deployments": {"PDProxyServer": {"status": "HEALTHY", "message": ""}}},
}
OPERATIONS = ("preview", "up", "refresh", "preflight", "verify", "clear-pending")


class Contract:
    """Calls the API and checks each answer against the document; remembers what it met."""

    def __init__(self, client: FlaskClient, document: dict[str, Any]):
        self.client = client
        self.document = document
        self.met: set[tuple[str, str, str]] = set()

    def documented(self) -> set[tuple[str, str, str]]:
        return {(path, method, status)
                for path, item in self.document["paths"].items()
                for method, operation in item.items() if method in METHODS
                for status in operation["responses"]}

    def call(self, method: str, template: str, status: Optional[int] = None, headers: Any = AUTH,
             client: Optional[FlaskClient] = None, **kwargs: Any) -> Any:
        params = {key: kwargs.pop(key) for key in ("name", "id", "run", "keyName") if key in kwargs}
        response = getattr(client or self.client, method)(PREFIX + template.format(**params),
                                                           headers=headers, **kwargs)
        where = f"{method.upper()} {template} -> {response.status_code}"
        if status is not None:
            assert response.status_code == status, (where, response.get_data(as_text=True)[:500])
        self.check(template, method, response, where)
        return response

    def check(self, template: str, method: str, response: Any, where: str) -> None:
        operation = self.document["paths"][template][method]
        status = str(response.status_code)
        assert status in operation["responses"], f"{where}: status not documented"
        content = operation["responses"][status].get("content", {})
        if not content:  # documented without a body (204): none is sent
            assert response.get_data() == b"", f"{where}: a body where none is documented"
            self.met.add((template, method, status))
            return
        assert response.mimetype in content, f"{where}: {response.mimetype} not documented"
        self.met.add((template, method, status))
        if response.mimetype != "application/json":
            return
        schema = {**content["application/json"]["schema"], "components": self.document["components"]}
        body = response.get_json()
        problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                    for e in Draft202012Validator(schema).iter_errors(body)]
        assert not problems, f"{where}: answer does not match the document:\n" + "\n".join(problems[:20])

    def job(self, response: Any, client: Optional[FlaskClient] = None) -> dict[str, Any]:
        job = wait_for_job(client or self.client, response.get_json()["job"])
        self.call("get", "/jobs/{id}", 200, id=job["id"], client=client)
        return job


@pytest.fixture
def document(client: FlaskClient) -> dict[str, Any]:
    return client.get(f"{PREFIX}/openapi.json", headers=AUTH).get_json()


def test_the_document_is_openapi_3_1_and_every_schema_is_valid_json_schema(document):
    assert document["openapi"] == "3.1.0"
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    refs = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"].rsplit("/", 1)[-1])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(document)
    assert refs <= set(document["components"]["schemas"])


def test_request_bodies_refuse_unknown_keys_in_the_document_too(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if "requestBody" not in operation:
                continue
            ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            schema = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
            assert schema["additionalProperties"] is False, (path, method)


def test_the_answers_name_the_keys_the_api_returns(document):
    """Keys the hand-written document used to leave out."""
    schemas = document["components"]["schemas"]
    assert {"summary", "warnings", "connect", "createdAt", "lastResult", "deployed", "pending"} <= set(
        schemas["DeploymentView"]["properties"])
    assert {"settings", "hasPendingChanges", "deployedAt"} <= set(schemas["DeploymentRow"]["properties"])
    assert {"actor", "createdAt", "startedAt", "finishedAt", "summary"} <= set(schemas["JobView"]["properties"])
    assert {"rayPods", "serveApplication", "namespace"} <= set(schemas["LiveStatus"]["properties"])
    assert {"raypd:decode", "aws:region", "raypd:hfToken"} <= set(schemas["DeploymentConfig"]["properties"])


def test_the_documented_job_statuses_and_operations_are_the_ones_the_app_has(document):
    from webui.engines.base import OPERATIONS as ENGINE_OPERATIONS
    from webui.status import CHECK_OPERATIONS, Operation
    from webui.store import ACTIVE_STATUSES, FINAL_STATUSES

    job = document["components"]["schemas"]["JobView"]["properties"]
    assert set(job["status"]["enum"]) == {str(status) for status in (*ACTIVE_STATUSES, *FINAL_STATUSES)}
    assert set(job["operation"]["enum"]) == {*ENGINE_OPERATIONS, *CHECK_OPERATIONS, Operation.BENCHMARK.value,
                                                Operation.RESILIENCE.value, Operation.CONFORMANCE.value}
    assert set(job["operation"]["enum"]) == {op.value for op in Operation}


def _offline_flow(api: Contract, app: Flask) -> None:
    limit = app.extensions["raypd"].settings.max_body_bytes
    huge = {"data": "x" * (limit + 1024), "content_type": "application/json"}
    api.call("get", "/deployments", 200)
    api.call("get", "/openapi.json", 200)
    created = api.call("post", "/deployments", 201, json={"name": "demo", "config": {
        "aws:region": "us-west-2", "raypd:decode": {"replicas": 2}, "raypd:hfToken": "hf_ContractTest0123456789"}})
    assert created.get_json()["spec"]["raypd:hfToken"] == "[secret]"
    api.call("post", "/deployments", 409, json={"name": "demo"})
    api.call("post", "/deployments", 400, json={"name": "demo2", "config": {"raypd:decode": {"replicas": "2"}}})
    api.call("post", "/deployments", 400, json={"name": "demo2", "extra": True})
    api.call("post", "/deployments", 413, **huge)
    api.call("get", "/deployments/{name}", 200, name="demo")
    api.call("get", "/deployments/{name}", 404, name="nope")
    api.call("patch", "/deployments/{name}", 200, name="demo", json={"config": {"raypd:image": None}})
    api.call("patch", "/deployments/{name}", 400, name="demo", json={"config": {"raypd:bogus": 1}})
    api.call("patch", "/deployments/{name}", 400, name="demo", json={"config": []})
    api.call("patch", "/deployments/{name}", 404, name="nope", json={"config": {}})
    api.call("patch", "/deployments/{name}", 413, name="demo", **huge)

    preview = api.job(api.call("post", "/deployments/{name}/preview", 202, name="demo"))
    assert preview["status"] == "succeeded"
    preflight = api.job(api.call("post", "/deployments/{name}/preflight", 202, name="demo"))
    assert preflight["result"]["kind"] == "preflight"
    verify = api.job(api.call("post", "/deployments/{name}/verify", 202, name="demo"))
    assert {check["status"] for check in verify["result"]["checks"]} == {"skip"}
    api.call("post", "/deployments/{name}/up", 400, name="demo", json={"force": "true"})
    up = api.job(api.call("post", "/deployments/{name}/up", 202, name="demo", json={"force": False}))
    assert up["status"] == "succeeded"
    detail = api.call("get", "/deployments/{name}", 200, name="demo").get_json()
    assert detail["connect"] and detail["outputs"] and detail["resources"]
    api.call("patch", "/deployments/{name}", 200, name="demo", json={"config": {"raypd:decode": {"replicas": 1}}})
    assert api.call("get", "/deployments/{name}", 200, name="demo").get_json()["pendingChanges"]
    api.call("delete", "/deployments/{name}/pending-config", 400, name="demo", json={"bogus": 1})
    api.call("delete", "/deployments/{name}/pending-config", 413, name="demo", **huge)
    api.call("delete", "/deployments/{name}/pending-config", 404, name="nope")
    back = api.call("delete", "/deployments/{name}/pending-config", 200, name="demo").get_json()
    assert back["pending"] is None and back["spec"] == back["deployed"]["spec"]
    api.call("delete", "/deployments/{name}/pending-config", 409, name="demo")  # nothing pending now
    checks = api.call("get", "/deployments/{name}/checks", 200, name="demo").get_json()
    assert checks["preflight"] and checks["verify"]
    api.call("get", "/deployments/{name}/status", 200, name="demo")
    api.call("get", "/deployments/{name}/pending", 200, name="demo")
    api.call("post", "/deployments/{name}/clear-pending", 409, name="demo", json={"confirm": "demo"})
    api.call("post", "/deployments/{name}/clear-pending", 400, name="demo", json={})

    stream = api.call("get", "/jobs/{id}/events", 200, id=up["id"])
    assert stream.mimetype == "text/event-stream"
    assert json.loads(stream.get_data(as_text=True).strip().splitlines()[-1][len("data: "):])["kind"] == "end"
    api.call("get", "/jobs/{id}/events", 400, id=up["id"], headers={**AUTH, "Last-Event-ID": "-1"})
    api.call("get", "/jobs/{id}/events", 404, id="0000")
    api.call("get", "/jobs/{id}", 404, id="0000")
    api.call("post", "/jobs/{id}/cancel", 409, id=up["id"])
    api.call("post", "/jobs/{id}/cancel", 404, id="0000")
    api.call("post", "/jobs/{id}/cancel", 400, id=up["id"], json={"now": True})

    for operation in OPERATIONS:
        api.call("post", f"/deployments/{{name}}/{operation}", 404, name="nope",
                 json={"confirm": "nope"} if operation == "clear-pending" else None)
        api.call("post", f"/deployments/{{name}}/{operation}", 400, name="demo", json={"bogus": 1})
        api.call("post", f"/deployments/{{name}}/{operation}", 413, name="demo", **huge)
    for read in ("checks", "status", "pending", "benchmarks"):
        api.call("get", f"/deployments/{{name}}/{read}", 404, name="nope")
    # API keys live in a cluster: an offline plan has none.
    keys = "/deployments/{name}/api-keys"
    assert "offline plan has no cluster" in api.call("get", keys, 409, name="demo").get_json()["errors"][0]["message"]
    api.call("post", keys, 409, name="demo", json={"name": "ci"})
    api.call("delete", keys + "/{keyName}", 409, name="demo", keyName="ci")
    api.call("post", keys, 400, name="demo", json={"name": 1})
    api.call("post", keys, 413, name="demo", **huge)
    api.call("get", keys, 404, name="nope")
    api.call("post", keys, 404, name="nope", json={"name": "ci"})
    api.call("delete", keys + "/{keyName}", 404, name="nope", keyName="ci")
    # A benchmark needs something serving: an offline plan has nothing to measure.
    refused = api.call("post", "/deployments/{name}/benchmarks", 409, name="demo", json={"rates": [1]})
    assert "offline" in refused.get_json()["errors"][0]["message"]
    api.call("post", "/deployments/{name}/benchmarks", 400, name="demo", json={"rates": []})
    api.call("post", "/deployments/{name}/benchmarks", 400, name="demo", json={"rates": [1], "bogus": 1})
    api.call("post", "/deployments/{name}/benchmarks", 404, name="nope", json={"rates": [1]})
    api.call("post", "/deployments/{name}/benchmarks", 413, name="demo", **huge)
    assert api.call("get", "/deployments/{name}/benchmarks", 200, name="demo").get_json() == {"runs": []}
    assert api.call("get", "/benchmarks", 200).get_json() == {"runs": []}
    api.call("get", "/benchmarks/{run}", 404, run="0000")
    api.call("get", "/benchmarks/{run}/requests.jsonl", 404, run="0000")
    # A resilience check disrupts a live deployment: an offline plan has nothing to disrupt.
    res = "/deployments/{name}/resilience"
    refused = api.call("post", res, 409, name="demo", json={"fault": "node", "confirm": "demo"})
    assert "offline" in refused.get_json()["errors"][0]["message"]
    api.call("post", res, 400, name="demo", json={"fault": "node"})
    api.call("post", res, 400, name="demo", json={"fault": "node", "confirm": "demo", "bogus": 1})
    api.call("post", res, 404, name="nope", json={"fault": "node", "confirm": "nope"})
    api.call("post", res, 413, name="demo", **huge)
    assert api.call("get", res, 200, name="demo").get_json() == {"runs": []}
    api.call("get", res, 404, name="nope")
    # Conformance needs something serving too; a reference must be a deployment's name.
    refused = api.call("post", "/deployments/{name}/conformance", 409, name="demo", json={})
    assert refused.get_json()["errors"][0]["field"] == "deployment"
    api.call("post", "/deployments/{name}/conformance", 400, name="demo", json={"reference": "Not A Name"})
    api.call("post", "/deployments/{name}/conformance", 400, name="demo", json={"bogus": 1})
    api.call("post", "/deployments/{name}/conformance", 404, name="nope", json={})
    api.call("post", "/deployments/{name}/conformance", 413, name="demo", **huge)
    api.call("get", "/deployments/{name}/conformance", 404, name="demo")
    api.call("delete", "/deployments/{name}", 404, name="nope")
    api.call("delete", "/deployments/{name}", 400, name="demo", json={"bogus": 1})
    api.call("delete", "/deployments/{name}", 413, name="demo", **huge)

    refresh = api.job(api.call("post", "/deployments/{name}/refresh", 202, name="demo"))
    assert refresh["status"] == "succeeded"
    listed = api.call("get", "/deployments", 200).get_json()["deployments"]
    assert listed[0]["lastJob"] == refresh["id"]
    gone = api.job(api.call("delete", "/deployments/{name}", 202, name="demo"))
    assert gone["status"] == "succeeded"
    api.call("get", "/deployments/{name}", 404, name="demo")

    for path, item in api.document["paths"].items():  # no token: 401 everywhere
        for method in item:
            api.call(method, path, 401, headers={}, name="demo", id="0000", run="0000", keyName="ci")


def _no_cluster(outputs: Any, kubeconfig: Any, fault: str) -> Any:
    raise VerifyInputError("no cluster in this test")


def _real_flow(api: Contract, fake_app: Flask, fake_engine: FakeEngine, offline_only: FlaskClient) -> None:
    client = fake_app.test_client()
    checker = fake_app.extensions["raypd"].service.checker
    checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [
        Check.passed("gpu-nodes", "GPU nodes", "2 of 2 Ready"),
        Check.failed("nixl-backend", "NIXL backend", "Backend UCX was instantiated on decode",
                     "set kvTransfer.backend LIBFABRIC"),
        Check.warned("kv-transfer", "KV transfers", "no transfer seen yet")])
    fake_engine.live = {"modelId": "qwen3.5-9b", "kubeconfig": "apiVersion: v1\n"}

    api.call("post", "/deployments", 201, client=client, json={"name": "live", "config": {}})
    api.call("get", "/deployments/{name}/status", 200, client=client, name="live")  # not deployed yet
    up = api.job(api.call("post", "/deployments/{name}/up", 202, client=client, name="live"), client)
    assert up["status"] == "succeeded" and up["reports"]["verify"]["ok"] is False
    # The real snapshot function, given outputs that are not Contract 3: a whole-snapshot error.
    assert "error" in api.call("get", "/deployments/{name}/status", 200, client=client, name="live").get_json()
    checker.forget("live")
    checker.status_fn = lambda outputs, kubeconfig: dict(LIVE)
    assert api.call("get", "/deployments/{name}/status", 200, client=client, name="live").get_json()["available"]
    checker.forget("live")
    checker.status_fn = lambda outputs, kubeconfig: {**LIVE, "nodes": {"error": "forbidden"},
                                                     "rayPods": {"error": "forbidden"}}
    api.call("get", "/deployments/{name}/status", 200, client=client, name="live")
    assert api.call("get", "/deployments/{name}/checks", 200, client=client, name="live").get_json()["verify"]
    api.call("get", "/deployments/{name}", 200, client=client, name="live")
    api.call("patch", "/deployments/{name}", 200, client=client, name="live",
             json={"config": {"raypd:decode": {"replicas": 2}}})
    fake_engine.refuse_configure = "error: the backend is unreachable"
    api.call("delete", "/deployments/{name}/pending-config", 500, client=client, name="live")
    fake_engine.refuse_configure = None
    api.call("delete", "/deployments/{name}/pending-config", 200, client=client, name="live")
    api.call("patch", "/deployments/{name}", 200, client=client, name="live",
             json={"config": {"raypd:decode": {"replicas": 2}}})

    records = [{"index": i, "scheduled_s": i * 0.5, "sent_s": i * 0.5, "end_s": i * 0.5 + 0.3, "ttft_ms": 40.0 + i,
                "itl_ms": [10.0, 11.0], "e2e_ms": 300.0, "prompt_tokens": 20, "completion_tokens": 3,
                "input_tokens_requested": 16, "max_tokens": 3, "status": 200, "ok": True,
                "error_kind": None, "error": None} for i in range(4)]
    fake_app.extensions["raypd"].benchmarks.benchmarker.run_fn = (
        lambda outputs, kubeconfig, name, args, seconds, progress, cancelled: RunResult(summarize(records), records))
    # A resilience job (its run fails here at once: no cluster; tests/web/test_resilience_tab.py runs one).
    fake_app.extensions["raypd"].resilience.resilience.connect_fn = _no_cluster
    res = api.job(api.call("post", "/deployments/{name}/resilience", 202, client=client, name="live",
                           json={"fault": "decode-pod", "confirm": "live"}), client)
    assert res["status"] == "failed" and res["operation"] == "resilience"
    bench = api.job(api.call("post", "/deployments/{name}/benchmarks", 202, client=client, name="live",
                             json={"rates": [2], "requests": 4}), client)
    assert bench["status"] == "succeeded" and bench["summary"]["benchmark"]["run"] == bench["id"]
    run = api.call("get", "/benchmarks/{run}", 200, client=client, run=bench["id"]).get_json()
    assert run["summary"]["requests"]["completed"] == 4 and run["settings"]["rates"] == [2.0]
    lines = api.call("get", "/benchmarks/{run}/requests.jsonl", 200, client=client, run=bench["id"])
    assert [json.loads(line) for line in lines.get_data(as_text=True).splitlines()] == records
    assert api.call("get", "/deployments/{name}/benchmarks", 200, client=client, name="live").get_json()["runs"][0][
        "id"] == bench["id"]

    from serve.conformance.features import Outcome, Verdict
    from serve.conformance.report import FeatureResult
    from serve.conformance.report import Report as ConformanceReport

    fake_app.extensions["raypd"].conformance.conformer.run_fn = lambda target, reference, on_result: ConformanceReport(
        endpoint="http://e", model="qwen3.5-9b", results=(FeatureResult(
            "chat.basic", "chat", "a chat", Outcome(Verdict.PASS, "200", {"tokens": 3})),))
    conformance = api.job(api.call("post", "/deployments/{name}/conformance", 202, client=client, name="live"), client)
    assert conformance["status"] == "succeeded" and conformance["operation"] == "conformance"
    last = api.call("get", "/deployments/{name}/conformance", 200, client=client, name="live").get_json()
    assert last["id"] == conformance["id"] and last["report"]["features"][0]["id"] == "chat.basic"

    fake_engine.pending = list(PENDING)
    failed = api.job(api.call("post", "/deployments/{name}/up", 202, client=client, name="live"), client)
    assert failed["status"] == "failed" and failed["summary"]["pendingOperations"] == PENDING
    assert api.call("get", "/deployments/{name}/pending", 200, client=client, name="live").get_json() == {
        "operations": PENDING}
    api.call("post", "/deployments/{name}/clear-pending", 400, client=client, name="live", json={"confirm": "li"})
    api.job(api.call("post", "/deployments/{name}/clear-pending", 202, client=client, name="live",
                     json={"confirm": "live"}), client)

    fake_engine.gate.clear()
    running = api.call("post", "/deployments/{name}/refresh", 202, client=client, name="live").get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    for operation in OPERATIONS:
        busy = api.call("post", f"/deployments/{{name}}/{operation}", 409, client=client, name="live",
                        json={"confirm": "live"} if operation == "clear-pending" else None)
        assert busy.get_json()["job"] == running
    api.call("delete", "/deployments/{name}", 409, client=client, name="live")
    assert api.call("delete", "/deployments/{name}/pending-config", 409, client=client,
                    name="live").get_json()["job"] == running
    api.call("patch", "/deployments/{name}", 409, client=client, name="live",
             json={"config": {"raypd:decode": {"replicas": 2}}})
    api.call("get", "/jobs/{id}", 200, client=client, id=running)
    cancelled = api.call("post", "/jobs/{id}/cancel", 202, client=client, id=running).get_json()
    assert cancelled["id"] == running
    assert wait_for_job(client, running)["status"] == "cancelled"

    # The same home without the fake engine: "live" belongs to an engine that is not here.
    for operation in OPERATIONS:
        api.call("post", f"/deployments/{{name}}/{operation}", 503, client=offline_only, name="live",
                 json={"confirm": "live"} if operation == "clear-pending" else None)
    api.call("delete", "/deployments/{name}", 503, client=offline_only, name="live")
    api.call("post", "/deployments/{name}/benchmarks", 503, client=offline_only, name="live", json={"rates": [1]})
    api.call("post", "/deployments/{name}/resilience", 503, client=offline_only, name="live",
             json={"fault": "node", "confirm": "live"})
    api.call("post", "/deployments/{name}/conformance", 503, client=offline_only, name="live", json={})
    api.call("patch", "/deployments/{name}", 503, client=offline_only, name="live", json={"config": {}})
    api.call("delete", "/deployments/{name}/pending-config", 503, client=offline_only, name="live")
    api.call("get", "/deployments/{name}/status", 200, client=offline_only, name="live")
    api.call("get", "/deployments/{name}/pending", 200, client=offline_only, name="live")
    api.call("get", "/deployments", 200, client=offline_only)
    # Outputs whose kubeconfig cannot be used: the keys cannot be reached.
    api.call("get", "/deployments/{name}/api-keys", 503, client=client, name="live")
    api.call("post", "/deployments/{name}/api-keys", 503, client=client, name="live", json={"name": "ci"})
    api.call("delete", "/deployments/{name}/api-keys/{keyName}", 503, client=client, name="live", keyName="ci")


def _keys_flow(api: Contract, make_app: Any, home: Any) -> None:
    """The API keys of a deployment whose cluster is the Kubernetes stand-in."""
    from tests.fakes.kube_api import FakeKubeApi
    from tests.web.keys_support import EndpointEngine, quiet_checks, seed_keys

    with FakeKubeApi("healthy") as kube:
        seed_keys(kube)
        app = make_app(home=home, engine=EndpointEngine(kube))
        quiet_checks(app)
        client = app.test_client()
        keys, one = "/deployments/{name}/api-keys", "/deployments/{name}/api-keys/{keyName}"
        api.call("post", "/deployments", 201, client=client, json={"name": "keys", "config": {}})
        api.job(api.call("post", "/deployments/{name}/up", 202, client=client, name="keys"), client)
        api.call("get", keys, 200, client=client, name="keys")
        api.call("post", keys, 201, client=client, name="keys", json={"name": "ci"})
        api.call("post", keys, 409, client=client, name="keys", json={"name": "ci"})
        api.call("delete", one, 204, client=client, name="keys", keyName="ci")
        api.call("delete", one, 404, client=client, name="keys", keyName="ci")
        api.call("delete", one, 400, client=client, name="keys", keyName="Not-OK")
        api.call("delete", one, 409, client=client, name="keys", keyName="default")  # the last key


@pytest.mark.slow
def test_every_documented_answer_matches_what_the_api_really_answers(make_app, tmp_path, document):
    offline_app = make_app(home=tmp_path / "offline")
    api = Contract(offline_app.test_client(), document)
    _offline_flow(api, offline_app)

    fake_engine = FakeEngine()
    fake_app = make_app(home=tmp_path / "real", engine=fake_engine)
    offline_only = make_app(home=tmp_path / "real").test_client()
    _real_flow(api, fake_app, fake_engine, offline_only)
    _keys_flow(api, make_app, tmp_path / "keys")

    assert api.documented() - api.met == set(), "documented but never met"
