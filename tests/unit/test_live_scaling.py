"""The Scaling section of the Status panel (serve/live_scaling.py).

Serve's answers are the real Ray 2.60 capture of `GET /api/serve/applications/`
(tests/fixtures/real/ray/serve-applications.json) turned into an autoscaling one with the fields
ray/serve/schema.py defines (ServeInstanceDetails -> ApplicationDetails -> DeploymentDetails:
`status`, `status_trigger`, `message`, `target_num_replicas`, `replicas[].state`,
`deployment_config.autoscaling_config` as AutoscalingConfig.model_dump() writes it; the same in
Ray 2.58's and 2.60's wheels). The document `_autoscaling_answer` builds was validated with both
versions' own `ServeInstanceDetails(**document)` when this test was written (not here: .venv has no
Ray): 2.60 takes it as it is; 2.58 takes it without the capture's top-level
`restores_unset_config_options`, a key 2.60 added, which raypd does not read. The controller log
lines are Serve's (deployment_state.py `DeploymentState.autoscale`) in its text format
(logging_utils.py ServeFormatter). The end-to-end cases read a Kubernetes stand-in
(tests/fakes/kube_api.py) and, for the signal, a real Prometheus scraping it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from serve.live_scaling import _serve_phase, parse_decisions
from serve.live_status import cluster_status
from tests.fakes.kube_api import FakeKubeApi
from tests.patience import until
from tests.prometheus_server import answers, need_prometheus, prometheus_scraping

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "ray" / "serve-applications.json"
AUTOSCALED = {"raypd:decode": {"replicas": 1, "autoscaling": {
    "minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8, "upscaleDelaySeconds": 30}}}


def _line(verb: str, deployment: str, before: int, after: int, at: str, ongoing: float, running: int,
          app: str = "llm") -> str:
    return (f"INFO 2026-12-06 {at},{before}{after}4 controller 1200 -- {verb} Deployment(name='{deployment}', "
            f"app='{app}') from {before} to {after} replicas. Current ongoing requests: {ongoing:.2f}, "
            f"current running replicas: {running}.")


def _autoscaling_answer() -> dict[str, Any]:
    """The real capture's Decode:tiny, autoscaled 1..3 and scaling up from 1 to 2 (one replica
    RUNNING, one STARTING), as Serve answers while it does."""
    document = json.loads(REAL.read_text())
    decode = document["applications"]["llm"]["deployments"]["Decode:tiny"]
    config = decode["deployment_config"]
    del config["num_replicas"]
    config["autoscaling_config"] = {
        "min_replicas": 1, "initial_replicas": 1, "max_replicas": 3, "target_ongoing_requests": 8.0,
        "metrics_interval_s": 10.0, "look_back_period_s": 30.0, "smoothing_factor": 1.0,
        "upscale_smoothing_factor": None, "downscale_smoothing_factor": None, "upscaling_factor": None,
        "downscaling_factor": None, "downscale_delay_s": 600.0, "downscale_to_zero_delay_s": None,
        "upscale_delay_s": 30.0, "aggregation_function": "mean",
        "policy": {"policy_function": "ray.serve.autoscaling_policy:default_autoscaling_policy",
                   "policy_kwargs": {}}}
    starting = copy.deepcopy(decode["replicas"][0])
    starting.update(replica_id="q7w2e9r1", state="STARTING", actor_name="SERVE_REPLICA::llm#Decode:tiny#q7w2e9r1")
    decode["replicas"].append(starting)
    decode.update(status="UPSCALING", status_trigger="AUTOSCALING", message="Upscaling from 1 to 2 replicas.",
                  target_num_replicas=2)
    return document


def test_serves_answer_gives_replicas_now_target_bounds_and_the_latest_decision() -> None:
    decode = _autoscaling_answer()["applications"]["llm"]["deployments"]["Decode:tiny"]
    seen = _serve_phase(decode)
    assert (seen["running"], seen["starting"], seen["target"], seen["min"], seen["max"]) == (1, 1, 2, 1, 3)
    assert seen["targetOngoingRequests"] == 8.0 and seen["upscaleDelaySeconds"] == 30.0
    assert seen["status"] == {"status": "UPSCALING", "trigger": "AUTOSCALING",
                              "message": "Upscaling from 1 to 2 replicas."}
    assert seen["recorded"] == []  # Ray 2.58 / 2.60 never fill autoscaling_detail


def test_a_fixed_deployment_has_no_bounds_of_its_own_in_serves_answer() -> None:
    prefill = json.loads(REAL.read_text())["applications"]["llm"]["deployments"]["Prefill:tiny"]
    seen = _serve_phase(prefill)
    assert (seen["running"], seen["target"], seen["min"], seen["max"]) == (1, 1, None, None)
    assert seen["status"]["trigger"] == "CONFIG_UPDATE_COMPLETED"


def test_decisions_come_from_the_controller_log_newest_first_per_deployment() -> None:
    text = "\n".join([
        "INFO 2026-12-06 11:59:58,001 controller 1200 -- Deploying new version of Deployment(name='Decode:tiny', "
        "app='llm') (initial target replicas: 1).",
        _line("Upscaling", "Decode:tiny", 1, 2, "12:00:01", 9.2, 1),
        _line("Upscaling", "Prefill:tiny", 1, 2, "12:00:05", 3.0, 1),
        _line("Upscaling", "Decode:tiny", 2, 3, "12:01:10", 20.5, 2),
        _line("Downscaling", "Decode:tiny", 3, 1, "12:15:00", 0.0, 3),
        _line("Upscaling", "Decode:tiny", 1, 2, "12:20:00", 9.0, 1, app="other"),
    ])
    found = parse_decisions(text, "llm")
    assert [(d["from"], d["to"], d["direction"]) for d in found["Decode:tiny"]] == [(3, 1, "down"), (2, 3, "up"),
                                                                                   (1, 2, "up")]
    assert found["Decode:tiny"][0]["time"].startswith("2026-12-06 12:15:00")
    assert found["Decode:tiny"][1]["reason"] == "Current ongoing requests: 20.50, current running replicas: 2."
    assert [d["to"] for d in found["Prefill:tiny"]] == [2]
    lines = "\n".join(_line("Upscaling", "Decode:tiny", n, n + 1, "12:00:00", 1, n) for n in range(1, 9))
    assert [d["from"] for d in parse_decisions(lines, "llm")["Decode:tiny"]] == [8, 7, 6, 5, 4]


def _phases(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["phase"]: p for p in status["scaling"]["phases"]}


def test_the_panel_reads_serve_and_the_controller_log_of_the_deployment() -> None:
    with FakeKubeApi("healthy", config=AUTOSCALED) as kube:
        decode = kube.deployment_names["decode"]
        kube.serve_overrides = {decode: {"status": "UPSCALING", "status_trigger": "AUTOSCALING",
                                         "message": "Upscaling from 1 to 2 replicas.", "target_num_replicas": 2,
                                         "replica_states": ["RUNNING", "STARTING"]}}
        kube.scaling_log = [_line("Upscaling", decode, 1, 2, "12:00:01", 9.2, 1)]
        status = cluster_status(kube.outputs(), timeout=10)
        asked = [r for r in kube.requests if r["path"].endswith("api/v0/logs/file")]
    phases = _phases(status)
    assert list(phases) == ["prefill", "decode"]  # every phase, none missing
    d, p = phases["decode"], phases["prefill"]
    assert (d["autoscaled"], d["running"], d["starting"], d["target"], d["min"], d["max"]) == (True, 1, 1, 2, 1, 3)
    assert d["boundsSource"] == "Serve's deployment config" and d["targetOngoingRequests"] == 8.0
    assert d["status"]["message"] == "Upscaling from 1 to 2 replicas."
    assert [(x["from"], x["to"]) for x in d["decisions"]] == [(1, 2)]
    assert (p["autoscaled"], p["running"], p["target"], p["min"], p["max"], p["decisions"]) == (False, 1, 1, 1, 1, [])
    assert status["scaling"]["decisionsSource"] == "Serve controller log (/serve/controller_1200.log)"
    assert asked and asked[0]["query"]["filename"] == "serve/controller_1200.log"
    assert "decode minus prefill" in d["signal"]["words"]
    # No Prometheus behind the stand-in here: the signal says so, the rest is there.
    assert status["scaling"]["signals"]["available"] is False and d["signal"]["value"] is None


def test_what_could_not_be_read_says_so_and_the_bounds_come_from_the_outputs() -> None:
    with FakeKubeApi("healthy", config=AUTOSCALED, dashboard=False) as kube:
        status = cluster_status(kube.outputs(), timeout=10)
    scaling = status["scaling"]
    assert "error" in scaling["serve"] and "error" not in scaling
    assert scaling["decisionsSource"] == {"error": "Serve's controller log: not read: Serve's status, which "
                                                   "names the log file, could not be read"}
    d = _phases(status)["decode"]
    assert (d["min"], d["max"], d["boundsSource"], d["decisions"]) == (1, 3, "stack outputs (topology)", [])
    assert "running" not in d


def _series(kube: FakeKubeApi, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample named `name` on the stand-in's worker pods' metrics pages (Ray's export)."""
    pods = [p["metadata"]["name"] for p in kube.pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    return [(sample.labels, sample.value) for pod in pods
            for family in text_string_to_metric_families(kube.metrics_text(pod))
            for sample in family.samples if sample.name == name]


def test_the_stand_in_exports_series_for_the_replicas_its_serve_api_lists_while_one_starts() -> None:
    """What verify's metrics-flowing and the signal read must be the story real Ray tells: every
    replica the Serve API lists has its Serve series from its start on (Ray's
    python/ray/serve/_private/replica.py, `ReplicaMetricsManager.__init__`), a STARTING one with
    nothing running and no engine series, the RUNNING one its load and, once it served, its engine's."""
    with FakeKubeApi("healthy", config=AUTOSCALED) as kube:
        decode = kube.deployment_names["decode"]
        kube.serve_load = {"prefill": 2, "decode": 7}
        kube.serve_overrides = {decode: {"replica_states": ["RUNNING", "STARTING"]}}
        kube.record_chat()  # verify's chat: prefill and the RUNNING decode replica serve it
        listed = {r["replica_id"]: r["state"] for r in
                  kube.serve_details()["applications"]["llm"]["deployments"][decode]["replicas"]}
        starts, queries = ({labels["replica"]: value for labels, value in _series(kube, name)
                            if labels["deployment"] == decode}
                           for name in ("ray_serve_deployment_replica_starts_total",
                                        "ray_serve_replica_processing_queries"))
        engines = {labels["ReplicaId"] for labels, _ in _series(kube, "ray_vllm_generation_tokens_total")}
    running = [rid for rid, state in listed.items() if state == "RUNNING"]
    starting = [rid for rid, state in listed.items() if state == "STARTING"]
    assert (len(running), len(starting)) == (1, 1)
    assert running == [kube.replicas["decode"][0]["replica_id"]]  # the built replica keeps its id
    assert starts == {running[0]: 1.0, starting[0]: 1.0}
    assert queries == {running[0]: 7.0, starting[0]: 0.0}
    assert running[0] in engines and starting[0] not in engines


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The stand-in with prefill running 2 requests and decode 7 (5 of its own, 2 waiting on
    prefill), a real Prometheus scraping its pods."""
    need_prometheus()
    with FakeKubeApi("healthy", config=AUTOSCALED) as kube:
        kube.serve_load = {"prefill": 2, "decode": 7}
        with prometheus_scraping(kube, tmp_path_factory.mktemp("prometheus")) as base:
            until(lambda: answers(base, "sum(ray_serve_replica_processing_queries) == 9"),
                  "both phases' running requests scraped")
            yield {"status": cluster_status(kube.outputs(), timeout=10)}


def test_each_phase_shows_the_signal_its_policy_scales_on(loaded: dict[str, Any]) -> None:
    phases = _phases(loaded["status"])
    assert loaded["status"]["scaling"]["signals"] == {"available": True}
    assert phases["prefill"]["signal"]["value"] == 2
    assert phases["decode"]["signal"]["value"] == 5  # not its 7 ongoing: 2 of them wait on prefill
    assert phases["decode"]["signal"]["perReplica"] == 5
