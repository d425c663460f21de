"""serve.benchmark.replicas: each phase's replicas read from a stand-in of Ray Serve's REST API
(tests/fakes/serve_api.py, built from Ray 2.60's python/ray/serve/schema.py), sampled on an
injected clock, and each scale-up timed from the load step that caused it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.replicas import (
    ReplicaRecorder,
    ReplicaSampler,
    SampleError,
    changes,
    phase_counts,
    raypd_deployments,
    replicas_summary,
    scale_ups,
)
from serve.benchmark.schedule import parse_inline
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.serve_api import ServeApi, instance_details

DEPLOYMENTS = {"prefill": "Prefill:m", "decode": "Decode:m"}


def test_counts_are_the_target_and_the_running_replicas_of_each_phases_deployment():
    document = instance_details({"Prefill:m": (1, ["RUNNING"]),
                                 "Decode:m": (3, ["RUNNING", "STARTING", "RUNNING", "STOPPING"]),
                                 "OpenAiIngress": (1, ["RUNNING"])})
    assert phase_counts(document, DEPLOYMENTS) == {"prefill": {"target": 1, "running": 1},
                                                   "decode": {"target": 3, "running": 2}}
    assert phase_counts(document, DEPLOYMENTS, app="other") == {}
    # A phase the app does not have (colocated, here) is left out, not counted as zero replicas.
    assert phase_counts(document, {**DEPLOYMENTS, "colocated": "LLMServer:m"}).keys() == {"prefill", "decode"}
    with pytest.raises(SampleError, match="no `applications`"):
        phase_counts({"detail": "Not Found"}, DEPLOYMENTS)


def test_raypds_deployment_names_come_from_their_one_home():
    assert raypd_deployments("Qwen/Qwen3.5-9B") == {"prefill": "Prefill:Qwen--Qwen3_5-9B",
                                                    "decode": "Decode:Qwen--Qwen3_5-9B",
                                                    "colocated": "LLMServer:Qwen--Qwen3_5-9B"}


def test_the_sampler_reads_the_rest_api_and_says_when_it_cannot():
    with ServeApi(lambda t: {"Prefill:m": (1, ["RUNNING"]), "Decode:m": (2, ["RUNNING", "STARTING"])}) as api:
        assert ReplicaSampler(api.url, DEPLOYMENTS).sample() == {"prefill": {"target": 1, "running": 1},
                                                                 "decode": {"target": 2, "running": 1}}
        assert api.requests == ["/api/serve/applications/"]
    with ServeApi(lambda t: {}, status=503) as api, pytest.raises(SampleError, match="answered HTTP 503"):
        ReplicaSampler(api.url + "/", DEPLOYMENTS).sample()
    with pytest.raises(SampleError, match="127.0.0.1:9"):
        ReplicaSampler("http://127.0.0.1:9", DEPLOYMENTS, timeout_s=5).sample()


def _row(t: float, prefill: tuple[int, int], decode: tuple[int, int]) -> dict[str, Any]:
    return {"t": t, "phases": {"prefill": dict(zip(("target", "running"), prefill, strict=True)),
                               "decode": dict(zip(("target", "running"), decode, strict=True))}}


def test_a_scale_up_is_timed_from_the_load_step_that_caused_it():
    """Load 1/s, then 8/s from 60 s: Serve raises decode's target at 90 s, the new replica runs at
    150 s: the scale-up took 90 s from the step (not 150 s from the start), 60 s from the decision."""
    schedule = parse_inline("0s:1,60s:8,200s:1,300s:end")
    samples = [_row(0, (1, 1), (1, 1)), _row(60, (1, 1), (1, 1)), _row(90, (1, 1), (2, 1)),
               _row(120, (1, 1), (2, 1)), _row(150, (1, 1), (2, 2)), _row(250, (1, 1), (1, 1))]
    assert scale_ups(samples, schedule) == [{
        "phase": "decode", "from": 1, "to": 2, "load_step": 1, "step_at_s": 60, "target_raised_s": 90,
        "serving_s": 150, "took_s": 90, "target_to_serving_s": 60}]


def test_replicas_that_come_one_by_one_are_each_timed_from_the_first_decision_and_a_ramp_is_a_step():
    schedule = parse_inline("0s:1,30s:1->9,90s:9,120s:end")
    samples = [_row(0, (1, 1), (1, 1)), _row(40, (3, 1), (1, 1)), _row(70, (3, 2), (1, 1)),
               _row(80, (3, 3), (1, 1)), _row(100, (1, 1), (1, 1)), _row(110, (2, 1), (1, 1)),
               _row(115, (2, 2), (1, 1))]
    ups = scale_ups(samples, schedule)
    assert [(u["phase"], u["from"], u["to"], u["load_step"], u["target_raised_s"], u["took_s"]) for u in ups] == [
        ("prefill", 1, 2, 1, 40, 40), ("prefill", 2, 3, 1, 40, 50),
        # After a scale-down, a new rise during the steady 9/s step: caused by the ramp, the last rise.
        ("prefill", 1, 2, 1, 110, 85)]
    # Without a schedule (a trace) there is no load step: only the decision-to-serving time.
    assert [(u["load_step"], u["took_s"], u["target_to_serving_s"]) for u in scale_ups(samples)][0] == (None, None, 30)


def test_the_recorder_samples_on_the_runs_clock_and_keeps_a_miss_as_a_miss():
    now = [100.0]

    class Sampler:
        calls = 0

        def sample(self) -> dict[str, Any]:
            self.calls += 1
            now[0] += 0.5
            if self.calls == 2:
                raise SampleError("http://h/api/serve/applications/ answered HTTP 502")
            if self.calls == 3:
                stop.set()
            return {"decode": {"target": self.calls, "running": 1}}

    recorder = ReplicaRecorder(Sampler(), every_s=0.0, clock=lambda: now[0])
    stop = asyncio.Event()
    asyncio.run(recorder.run(99.0, stop))
    assert recorder.samples == [
        {"t": 1.5, "phases": {"decode": {"target": 1, "running": 1}}},
        {"t": 2.0, "error": "http://h/api/serve/applications/ answered HTTP 502"},
        {"t": 2.5, "phases": {"decode": {"target": 3, "running": 1}}},
        {"t": 3.0, "phases": {"decode": {"target": 4, "running": 1}}},  # the last one, after the stop
    ]
    summary = replicas_summary(recorder, None)
    assert summary["sampled"] and summary["phases"] == ["decode"] and summary["samples_taken"] == 4
    assert summary["failed_samples"] == 1 and summary["last_error"].endswith("answered HTTP 502")
    assert summary["samples"] == [row for row in recorder.samples if "phases" in row]  # each one a change


def test_the_summary_keeps_the_counts_as_a_step_function():
    rows = [_row(t, (1, 1), (1, 1)) for t in range(5)] + [_row(5, (1, 1), (2, 1)), _row(6, (1, 1), (2, 1)),
                                                          _row(7, (1, 1), (2, 2)), _row(8, (1, 1), (2, 2))]
    assert [row["t"] for row in changes(rows)] == [0, 5, 7, 8]


def test_without_a_dashboard_or_an_answer_the_summary_says_replicas_were_not_sampled():
    assert replicas_summary(None, None) == {"sampled": False, "why": "no --dashboard given"}

    class Down:
        def sample(self) -> dict[str, Any]:
            raise SampleError("http://h: connection refused")

    recorder = ReplicaRecorder(Down(), clock=lambda: 5.0)
    recorder.take(4.0)
    assert replicas_summary(recorder, None) == {
        "sampled": False, "why": "the Serve REST API never answered (http://h: connection refused)"}


def test_a_scheduled_run_records_each_phases_replicas_and_times_the_scale_up(tmp_path: Path) -> None:
    """Against the fake endpoint and the stand-in REST API: decode's target goes to 2 at 0.8 s after
    the first sample (taken as the run starts), its second replica runs from 1.2 s; the load steps
    up at 0.5 s and lasts to 2.5 s."""
    def phases(t: float) -> dict[str, tuple[int, list[str]]]:
        decode = (1, ["RUNNING"]) if t < 0.8 else (2, ["RUNNING", "STARTING" if t < 1.2 else "RUNNING"])
        return {"Prefill:m": (1, ["RUNNING"]), "Decode:m": decode}

    out = tmp_path / "run"
    with OpenAIServer("m", output_tokens=2) as server, ServeApi(phases) as api:
        assert main(["run", "--endpoint", server.url, "--model", "m", "--schedule", "0s:2,0.5s:10,2.5s:end",
                     "--input-tokens", "3", "--output-tokens", "2", "--dashboard", api.url,
                     "--serve-deployments", json.dumps(DEPLOYMENTS), "--sample-every", "0.05",
                     "--out", str(out), "--json"]) == 0
    replicas = json.loads((out / "summary.json").read_text(encoding="utf-8"))["replicas"]
    assert replicas["sampled"] and replicas["phases"] == ["decode", "prefill"]
    assert replicas["max_running"] == {"decode": 2, "prefill": 1}
    (up,) = replicas["scale_ups"]
    assert (up["phase"], up["from"], up["to"], up["load_step"], up["step_at_s"]) == ("decode", 1, 2, 1, 0.5)
    assert up["took_s"] == pytest.approx(up["serving_s"] - 0.5, abs=1e-3)
    assert up["target_raised_s"] <= up["serving_s"] <= replicas["samples"][-1]["t"]
    assert [row["phases"]["decode"] for row in replicas["samples"]][-1] == {"target": 2, "running": 2}


def test_with_outputs_the_replicas_come_through_the_api_servers_proxy_to_the_head(tmp_path: Path) -> None:
    """`run --outputs` with a schedule samples the stack's dashboardService:8265 through the API
    server's service proxy (the NetworkPolicy admits the API server there), with raypd's names."""
    from components.render.serve_config import serve_deployment_name
    from tests.fakes.kube_api import FakeKubeApi

    model = "org/some-model.v1"
    names = {phase: serve_deployment_name(phase, model) for phase in ("prefill", "decode")}
    with FakeKubeApi() as kube, OpenAIServer(model, output_tokens=2) as server, ServeApi(
            lambda t: {names["prefill"]: (1, ["RUNNING"]), names["decode"]: (2, ["RUNNING", "STARTING"])}) as api:
        kube.serve_upstream, kube.dashboard_upstream = server.url, api.url
        outputs = {**kube.outputs(), "modelId": model}
        (tmp_path / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
        assert main(["run", "--outputs", str(tmp_path / "outputs.json"), "--schedule", "0s:4,0.5s:end",
                     "--input-tokens", "3", "--output-tokens", "2", "--out", str(tmp_path / "run"), "--json"]) == 0
        proxied = {r["path"] for r in kube.requests if "8265" in r["path"]}
    assert proxied == {f"/api/v1/namespaces/{outputs['namespace']}/services/{outputs['dashboardService']}:8265"
                       "/proxy/api/serve/applications/"}
    replicas = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))["replicas"]
    assert replicas["sampled"] and replicas["failed_samples"] == 0
    assert replicas["samples"][0]["phases"] == {"prefill": {"target": 1, "running": 1},
                                                "decode": {"target": 2, "running": 1}}
