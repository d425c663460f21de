"""serve.verify: the verify checks against a fake stack's Kubernetes API, and the CLI's contract.

Each scenario of tests.fakes.kube_api is a deployment fault a user would hit; the report must name
it in the right check. The CLI runs as users run it (`python -m serve.verify`), outputs from a file
or stdin, and its exit codes (0 ok, 1 a check failed, 2 invalid input) are asserted.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.config.checks import VERIFY_IDS, Report
from serve.evidence import VerifyPlan
from serve.verify import cluster_status, run_verify
from serve.verify.endpoint import CHAT_PROMPT
from serve.verify.external import ENDPOINT_IDS
from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.patience import PATIENCE_S
from tests.prometheus_server import prometheus_scraping
from tests.unit.cli_support import ROOT, run_module

FAST = {"kv_wait_seconds": 0, "timeout": 5}
# With a real Prometheus (tests/prometheus_server.py) the chat's series take a scrape and a rule
# evaluation (1 s each there) to arrive: wait for them, ending at once when they are in.
METRICS = {"metrics_wait_seconds": PATIENCE_S, "metrics_poll_seconds": 0.5}


def statuses(report: Report) -> dict[str, str]:
    return {check.id: check.status for check in report.checks}


def detail(report: Report, check_id: str) -> str:
    return next(check.detail for check in report.checks if check.id == check_id)


# ---- scenarios ----

EXPECTED: dict[str, dict[str, str]] = {
    # The stand-in's outputs have no `endpoint` (as a stack from before issue 17): nothing external
    # to test, said as skip (tests/unit/test_endpoint_checks.py tests those two checks).
    "healthy": {cid: "skip" if cid in ENDPOINT_IDS else "pass" for cid in VERIFY_IDS},
    "ucx-fallback": {"nixl-backend": "fail", "efa-devices": "pass", "kv-transfer": "pass"},
    "mixed-backends": {"nixl-backend": "fail", "kv-transfer": "pass"},
    "efa-not-advertised": {"efa-devices": "fail", "gpu-nodes": "pass"},
    "two-zones": {"one-zone": "fail", "gpu-nodes": "pass"},
    "rayservice-not-ready": {"rayservice-ready": "fail", "serve-app-running": "fail",
                             "replica-placement": "fail", "endpoint-models": "fail",
                             "endpoint-chat": "fail", "kv-transfer": "skip"},
    "no-kv-transfer": {"endpoint-chat": "pass", "kv-transfer": "fail"},
    "partial-recompute": {"endpoint-chat": "pass", "kv-transfer": "fail", "nixl-backend": "pass"},
    "failed-transfers": {"endpoint-chat": "fail", "kv-transfer": "fail"},
    "metrics-stale": {"endpoint-chat": "pass", "kv-transfer": "warn"},
    "colocated": {"efa-devices": "skip", "nixl-backend": "skip", "kv-transfer": "skip",
                  "serve-app-running": "pass", "replica-placement": "pass", "endpoint-chat": "pass"},
    "missing-node": {"gpu-nodes": "fail"},
    "shared-node": {"replica-placement": "fail", "kv-transfer": "pass"},
}


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_scenarios_are_reported_in_the_right_check(scenario: str, tmp_path: Path) -> None:
    with FakeKubeApi(scenario) as kube, contextlib.ExitStack() as stack:
        if scenario == "healthy":  # the other scenarios' Prometheus Service has no endpoint: fail
            stack.enter_context(prometheus_scraping(kube, tmp_path / "prometheus"))
        report = run_verify(kube.outputs(), **FAST, **METRICS)
    got = statuses(report)
    assert list(got) == list(VERIFY_IDS)
    for check_id, status in EXPECTED[scenario].items():
        assert got[check_id] == status, f"{check_id}: {detail(report, check_id)}"
    assert report.ok == ("fail" not in got.values())


def test_healthy_report_says_where_the_evidence_came_from() -> None:
    with FakeKubeApi("healthy") as kube:
        report = run_verify(kube.outputs(), **FAST)
        paths = [r["path"] for r in kube.requests]
    assert "decode's vLLM metrics on" in detail(report, "kv-transfer")
    assert "port 8080" in detail(report, "kv-transfer")
    assert "Ray log API" in detail(report, "nixl-backend")
    assert "Prefill:qwen3_5-9b" in detail(report, "replica-placement")
    assert "/api/v1/namespaces/inference/services/ray-llm-head-svc:8265/proxy/api/serve/applications/" in paths
    assert any(p.endswith(":8080/proxy/metrics") for p in paths)
    assert not any("/exec" in p or "/portforward" in p or "/attach" in p for p in paths)


def test_ucx_fallback_detail_names_the_backend_and_the_source() -> None:
    with FakeKubeApi("ucx-fallback") as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "nixl-backend")
    assert "Backend UCX was instantiated" in text and "LIBFABRIC was asked" in text
    assert "Ray log API" in text


@pytest.mark.parametrize("ray_logs", [True, False], ids=["ray-log-api", "pod-logs"])
def test_one_log_with_the_asked_backend_and_another_fails_nixl_backend(ray_logs: bool) -> None:
    """Decode's NIXL agent instantiated UCX besides the LIBFABRIC asked for: NIXL may move the KV
    cache over either, so the asked backend's line beside another's proves nothing."""
    with FakeKubeApi("mixed-backends", ray_logs=ray_logs) as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "nixl-backend")
    assert statuses(report)["nixl-backend"] == "fail", text
    assert "Backend UCX was instantiated alongside LIBFABRIC, but LIBFABRIC was asked" in text
    if ray_logs:
        assert "Decode:" in text and "Prefill:" not in text  # only the decode's log is mixed


def test_without_ray_log_api_the_pod_logs_are_read() -> None:
    with FakeKubeApi("ucx-fallback", ray_logs=False) as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["nixl-backend"] == "fail"
    assert "worker pods' container logs" in detail(report, "nixl-backend")


def test_without_metrics_plain_vllm_kv_log_lines_are_the_evidence() -> None:
    with FakeKubeApi("healthy", metrics=False, metric_prefix="vllm:") as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["kv-transfer"] == "pass"
    assert "KV Transfer metrics" in detail(report, "kv-transfer")


def test_without_metrics_under_ray_there_is_no_kv_log_line_and_no_pass() -> None:
    with FakeKubeApi("healthy", metrics=False) as kube:  # Ray's stat logger prints no KV line
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["kv-transfer"] == "warn"
    assert "never under Ray Serve LLM" in detail(report, "kv-transfer")
    with FakeKubeApi("no-kv-transfer", metrics=False, ray_logs=False) as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["kv-transfer"] == "warn"
    assert "a 200 alone is not proof" in detail(report, "kv-transfer")


@pytest.mark.parametrize("executor", ["ray", "mp"])
def test_nixl_line_is_found_where_each_executor_writes_it(executor: str) -> None:
    """GPU: the NIXL agent lives in a RayWorkerWrapper actor (its own .out file); CPU: in a
    subprocess of the replica (the replica's files). The UCX fallback must be caught in both."""
    with FakeKubeApi("ucx-fallback", executor=executor) as kube:
        report = run_verify(kube.outputs(), **FAST)
        actor_queries = [r["query"] for r in kube.requests if r["path"].endswith("/proxy/api/v0/actors")]
        log_queries = [r["query"] for r in kube.requests if r["path"].endswith("/proxy/api/v0/logs/file")]
        worker_ids = {a["actor_id"] for a in kube.worker_actors}
    assert statuses(report)["nixl-backend"] == "fail", detail(report, "nixl-backend")
    assert "Backend UCX was instantiated" in detail(report, "nixl-backend")
    assert actor_queries, "the State API was not asked for the engines' worker actors"
    if executor == "ray":
        assert "RayWorkerWrapper actor(s) on its node" in detail(report, "nixl-backend")
        assert worker_ids and worker_ids <= {q.get("actor_id") for q in log_queries}
        assert {q.get("suffix") for q in log_queries} == {"out", "err"}


def test_without_the_state_api_a_gpu_engine_is_no_pass_and_says_why() -> None:
    with FakeKubeApi("healthy", executor="ray", state_api=False) as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["nixl-backend"] == "warn"
    assert "RayWorkerWrapper actors not listed" in detail(report, "nixl-backend")


@pytest.mark.parametrize("prefix", ["ray_vllm_", "ray_vllm:", "vllm:"])
def test_kv_counters_are_read_under_every_metric_spelling(prefix: str) -> None:
    with FakeKubeApi("healthy", metric_prefix=prefix) as kube:
        healthy = run_verify(kube.outputs(), **FAST)
    with FakeKubeApi("failed-transfers", metric_prefix=prefix) as kube:
        failed = run_verify(kube.outputs(), **FAST)
    assert statuses(healthy)["kv-transfer"] == "pass", detail(healthy, "kv-transfer")
    assert "1 NIXL transfer(s), 17 prompt token(s) from external_kv_transfer, local_compute +0" \
        in detail(healthy, "kv-transfer")
    assert statuses(failed)["kv-transfer"] == "fail"
    assert "2 NIXL transfer(s) failed" in detail(failed, "kv-transfer")


def test_recompute_is_a_failure_not_a_warning() -> None:
    with FakeKubeApi("no-kv-transfer") as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] == "fail"
    assert "decode computed 17 prompt token(s) itself" in text and "0 NIXL transfer(s)" in text


def test_transfers_and_local_compute_together_are_a_partial_recompute_failure() -> None:
    """The KV cache came over NIXL, yet decode computed part of the prompt itself: the transfer
    does not make up for the recompute."""
    with FakeKubeApi("partial-recompute") as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] == "fail", text
    assert "decode computed 5 prompt token(s) itself" in text
    assert "1 NIXL transfer(s), 12 prompt token(s) from external_kv_transfer, local_compute +5" in text


def test_a_failed_kv_load_answers_500_and_says_so_in_endpoint_chat() -> None:
    with FakeKubeApi("failed-transfers") as kube:
        report = run_verify(kube.outputs(), **FAST)
    chat, kv = detail(report, "endpoint-chat"), detail(report, "kv-transfer")
    assert "HTTP 500" in chat and "kv_load_failure_policy: fail" in chat
    assert "the decode recomputed the prompt" not in chat + kv
    assert "answered HTTP 500, as kv_load_failure_policy: fail makes it" in kv
    assert "decode failed 1 request(s) for a KV load failure" in kv


def test_counters_that_do_not_move_are_no_evidence_either_way() -> None:
    with FakeKubeApi("metrics-stale") as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["kv-transfer"] == "warn"
    assert "did not move within" in detail(report, "kv-transfer")


def test_engines_sharing_a_node_fail_placement_and_kv_reads_only_the_decode_series() -> None:
    with FakeKubeApi("shared-node") as kube:
        report = run_verify(kube.outputs(), **FAST)
    assert "the plan gives each its own node" in detail(report, "replica-placement")
    # prefill's local_compute rose on the same metrics page; decode's series (its ReplicaId) did not
    assert "local_compute +0" in detail(report, "kv-transfer")


def test_every_chat_prompt_is_new_so_no_prefix_cache_can_answer_it() -> None:
    with FakeKubeApi("healthy") as kube, \
            OpenAIServer("qwen3.5-9b", on_chat=kube.record_chat) as openai:
        run_verify(kube.outputs(), endpoint=openai.base_url, **FAST)
        run_verify(kube.outputs(), endpoint=openai.base_url, **FAST)
        prompts = [b["messages"][0]["content"] for m, p, b in openai.requests if m == "POST"]
        chats = [text for text in prompts if text.startswith(CHAT_PROMPT)]  # not api-parity's requests
    assert len(chats) == 2 and chats[0] != chats[1]


def test_nothing_answered_is_a_failure_never_ok(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from serve.kube import KubeClient

    class Broken(KubeClient):
        def request(self, method: str, path: str, **kwargs: Any) -> Any:
            raise RuntimeError(f"exploded near {self.token}")

    with FakeKubeApi("healthy") as kube:
        client = Broken(server=kube.url, ssl_context=None, token="planted-secret-777")
        with caplog.at_level(logging.DEBUG):
            report = run_verify(kube.outputs(), client=client, **FAST)
    got = statuses(report)
    assert "pass" not in got.values() and not report.ok
    assert got["gpu-nodes"] == "fail" and "nothing was checked" in detail(report, "gpu-nodes")
    everything = json.dumps(report.as_dict()) + caplog.text
    assert "planted-secret-777" not in everything and "[token]" in everything


def test_pinned_node_groups_map_by_phase_label() -> None:
    config = {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
              "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8}}
    with FakeKubeApi("healthy", config=config) as kube:
        report = run_verify(kube.outputs(), **FAST)
    got = statuses(report)
    assert got["gpu-nodes"] == "pass", detail(report, "gpu-nodes")
    assert got["replica-placement"] == "pass", detail(report, "replica-placement")
    assert "nvidia.com/gpu=8" in detail(report, "gpu-nodes")


def test_pinned_engine_on_the_other_group_fails_placement() -> None:
    config = {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
              "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8}}
    with FakeKubeApi("healthy", config=config) as kube:
        kube.replicas["prefill"][0]["node_ip"] = kube.replicas["decode"][0]["node_ip"]
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["replica-placement"] == "fail"
    text = detail(report, "replica-placement")
    assert "instead of node group prefill" in text and "share node" in text


SCALED_DECODE = {"raypd:decode": {"replicas": 2, "autoscaling": {
    "minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8, "downscaleDelaySeconds": 1200}}}


def test_an_autoscaled_phase_passes_anywhere_between_its_bounds() -> None:
    """Issue 30: Serve moves an autoscaled phase between minReplicas and maxReplicas; verify judges
    the count against those bounds (from the outputs), not the starting `replicas`."""
    with FakeKubeApi("healthy", config=SCALED_DECODE) as kube:
        plan = VerifyPlan.from_outputs(kube.outputs())
        assert (plan.phases["decode"].min_replicas, plan.phases["decode"].max_replicas) == (1, 3)
        assert (plan.groups["gpu"].min_nodes, plan.groups["gpu"].nodes, plan.groups["gpu"].max_nodes) == (2, 3, 4)
        kube.replicas["decode"] = kube.replicas["decode"][:1]  # scaled down to its minimum
        report = run_verify(kube.outputs(), **FAST)
    got = statuses(report)
    assert got["replica-placement"] == "pass", detail(report, "replica-placement")
    assert "1/1..3 RUNNING" in detail(report, "replica-placement")
    assert got["gpu-nodes"] == "pass" and "3/2..4 Ready" in detail(report, "gpu-nodes")


def test_an_autoscaled_phase_below_its_minimum_fails() -> None:
    with FakeKubeApi("healthy", config=SCALED_DECODE) as kube:
        for replica in kube.replicas["decode"]:
            replica["state"] = "STARTING"
        report = run_verify(kube.outputs(), **FAST)
    assert statuses(report)["replica-placement"] == "fail"
    assert "0 of 1..3 replica(s) RUNNING" in detail(report, "replica-placement")


# Every check that needs the Kubernetes API (all but the public endpoint's two).
NEEDS_API = [check for check in VERIFY_IDS if check not in ("gpu-nodes", *ENDPOINT_IDS)]


def test_unreachable_api_is_said_once_with_the_checks_it_stopped() -> None:
    """Issue 29 §2: an unreachable cluster repeated "connection refused" in 14 checks. The first
    check says why, once, and names the checks that did not run; each of those says "not run"."""
    from serve.verify.__main__ import write_report

    kube = FakeKubeApi("healthy").start()
    outputs = kube.outputs()
    kube.stop()
    report = run_verify(outputs, **FAST)
    got = statuses(report)
    assert got["gpu-nodes"] == "fail" and not report.ok
    first = detail(report, "gpu-nodes")
    assert "cannot reach the Kubernetes API" in first
    assert first.endswith("not run without the Kubernetes API: " + ", ".join(NEEDS_API))
    for check in NEEDS_API:
        assert got[check] == "skip"
        assert detail(report, check) == "not run: the Kubernetes API cannot be reached (gpu-nodes says why)"
    printed = io.StringIO()
    write_report(report, False, printed)
    assert printed.getvalue().count("connection refused") == 1, printed.getvalue()
    assert json.dumps(report.as_dict()).count("connection refused") == 1


def test_an_endpoint_given_is_still_checked_when_the_api_is_unreachable() -> None:
    kube = FakeKubeApi("healthy").start()
    outputs = kube.outputs()
    kube.stop()
    with OpenAIServer("qwen3.5-9b") as openai:
        report = run_verify(outputs, endpoint=openai.base_url, **FAST)
    got = statuses(report)
    assert got["endpoint-models"] == "pass" and got["endpoint-chat"] == "pass"
    assert "not run" not in detail(report, "api-parity")  # it reaches the endpoint given, as they do
    stopped = [check for check in NEEDS_API if check not in ("endpoint-models", "endpoint-chat", "api-parity")]
    assert detail(report, "gpu-nodes").endswith("not run without the Kubernetes API: " + ", ".join(stopped))


def test_a_silent_api_costs_one_timeout_and_every_check_still_reports() -> None:
    import socket

    with FakeKubeApi("healthy") as kube:
        outputs = kube.outputs()
    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        outputs["kubeconfig"] = outputs["kubeconfig"].replace(kube.url, f"http://127.0.0.1:{port}")
        report = run_verify(outputs, timeout=0.5, chat_timeout=0.5, kv_wait_seconds=0)
    got = statuses(report)
    assert list(got) == list(VERIFY_IDS)
    assert got["gpu-nodes"] == "fail" and "did not answer within 0.5 s" in detail(report, "gpu-nodes")
    assert got["endpoint-chat"] == "skip" and "gpu-nodes says why" in detail(report, "endpoint-chat")
    assert "pass" not in got.values()


def test_a_malformed_api_answer_warns_instead_of_crashing() -> None:
    with FakeKubeApi("healthy") as kube:
        kube.nodes[1]["status"]["conditions"] = "not a list of conditions"
        report = run_verify(kube.outputs(), **FAST)
        status = cluster_status(kube.outputs())
    got = statuses(report)
    assert list(got) == list(VERIFY_IDS)
    assert got["gpu-nodes"] == "warn" and "could not be evaluated" in detail(report, "gpu-nodes")
    assert got["rayservice-ready"] == "pass"
    json.dumps(status)


def test_outputs_without_any_kubeconfig_are_invalid_input() -> None:
    from serve.verify import VerifyInputError

    with FakeKubeApi("healthy") as kube:
        outputs = kube.outputs()
    del outputs["kubeconfig"]
    with pytest.raises(VerifyInputError, match="no kubeconfig"):
        run_verify(outputs)


# ---- --endpoint: a real OpenAI-compatible server ----

def test_endpoint_checks_run_against_a_given_openai_server() -> None:
    with FakeKubeApi("healthy") as kube, \
            OpenAIServer("qwen3.5-9b", on_chat=kube.record_chat) as openai:
        report = run_verify(kube.outputs(), endpoint=openai.base_url, **FAST)
        served = [(method, path) for method, path, _ in openai.requests]
        kube_paths = [r["path"] for r in kube.requests]
    got = statuses(report)
    assert got["endpoint-models"] == got["endpoint-chat"] == got["kv-transfer"] == "pass"
    assert ("GET", "/v1/models") in served and ("POST", "/v1/chat/completions") in served
    assert openai.url in detail(report, "endpoint-chat")
    assert not any("ray-llm-serve-svc" in p for p in kube_paths)
    body = next(b for m, p, b in openai.requests if m == "POST")
    assert body["max_tokens"] == 8 and body["temperature"] == 0 and body["model"] == "qwen3.5-9b"


def test_endpoint_serving_another_model_fails() -> None:
    with FakeKubeApi("healthy") as kube, OpenAIServer("some-other-model") as openai:
        report = run_verify(kube.outputs(), endpoint=openai.url, **FAST)
    got = statuses(report)
    assert got["endpoint-models"] == "fail" and "not qwen3.5-9b" in detail(report, "endpoint-models")
    assert got["endpoint-chat"] == "fail" and "HTTP 404" in detail(report, "endpoint-chat")
    assert got["kv-transfer"] == "skip"


def read_sse(response: http.client.HTTPResponse) -> list[str]:
    events = []
    for raw in response.read().decode("utf-8").split("\n\n"):
        if raw.startswith("data: "):
            events.append(raw[len("data: "):])
    return events


def test_openai_server_streams_sse_chunks_with_usage_and_done() -> None:
    with OpenAIServer("m") as server:
        host, port = server.url.removeprefix("http://").split(":")
        request = {"model": "m", "messages": [{"role": "user", "content": "hi there"}],
                   "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        connection.request("POST", "/v1/chat/completions", json.dumps(request),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type").startswith("text/event-stream")
        events = read_sse(response)
        connection.close()
        connection = http.client.HTTPConnection(host, int(port), timeout=5)
        connection.request("POST", "/v1/chat/completions",
                           json.dumps({**request, "stream": False}), {"Content-Type": "application/json"})
        whole = json.loads(connection.getresponse().read())
        connection.close()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 3
    assert whole["usage"]["completion_tokens"] == 3


# ---- the live status for the web app ----

def test_cluster_status_is_json_and_names_nodes_pods_and_app() -> None:
    with FakeKubeApi("healthy") as kube:
        status = cluster_status(kube.outputs())
    json.dumps(status)
    assert {n["nodeGroup"] for n in status["nodes"]} == {"gpu"}
    assert all(n["ready"] and n["zone"] == "us-east-2a" and n["gpus"] == 1 and n["efa"] == 1
               for n in status["nodes"])
    assert sorted(p["phase"] for p in status["rayPods"]) == ["decode", "prefill"]
    assert status["ready"]["status"] == "True"
    assert status["serveApplication"]["status"] == "RUNNING"
    assert status["serveApplication"]["deployments"]["Decode:qwen3_5-9b"]["status"] == "HEALTHY"
    assert DEFAULT_TOKEN not in json.dumps(status)


def test_cluster_status_reports_errors_inside_never_raises() -> None:
    kube = FakeKubeApi("healthy").start()
    outputs = kube.outputs()
    kube.stop()
    status = cluster_status(outputs)
    assert "cannot reach the Kubernetes API" in status["nodes"]["error"]
    assert "error" in status["ready"]
    assert cluster_status(outputs, kubeconfig="users: [broken")["error"].startswith("the kubeconfig")
    assert "error" in cluster_status({"not": "outputs"})
    assert DEFAULT_TOKEN not in json.dumps(cluster_status(outputs))


# ---- the CLI ----

def write_outputs(directory: Path, document: Any) -> Path:
    path = directory / "outputs.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


def run_stdin(*args: str, stdin: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "serve.verify", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture
def healthy(tmp_path: Path) -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as kube, prometheus_scraping(kube, tmp_path / "prometheus"):
        yield kube


@pytest.mark.slow
def test_cli_exit_0_and_json_report(healthy: FakeKubeApi, tmp_path: Path) -> None:
    result = run_module("serve.verify", "--outputs", str(write_outputs(tmp_path, healthy.outputs())),
                        "--json")
    assert result.returncode == 0, result.stderr
    report = Report.from_dict(json.loads(result.stdout))
    assert report.kind == "verify" and report.ok and len(report.checks) == len(VERIFY_IDS)
    assert DEFAULT_TOKEN not in result.stdout + result.stderr


@pytest.mark.slow
def test_cli_reads_stdin_and_exits_1_on_a_failed_check() -> None:
    with FakeKubeApi("failed-transfers") as kube:
        result = run_stdin("--outputs", "-", stdin=json.dumps(kube.outputs()))
    assert result.returncode == 1, result.stderr
    assert "[FAIL] kv-transfer" in result.stdout and "verify: FAILED" in result.stdout
    assert DEFAULT_TOKEN not in result.stdout + result.stderr


@pytest.mark.slow
def test_cli_kubeconfig_file_overrides_the_outputs(healthy: FakeKubeApi, tmp_path: Path) -> None:
    outputs = {**healthy.outputs(), "kubeconfig": "[secret]"}
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(healthy.kubeconfig(), encoding="utf-8")
    result = run_module("serve.verify", "--outputs", str(write_outputs(tmp_path, outputs)),
                        "--kubeconfig", str(kubeconfig))
    assert result.returncode == 0, result.stdout + result.stderr
    masked = run_module("serve.verify", "--outputs", str(write_outputs(tmp_path, outputs)))
    assert masked.returncode == 2 and "--show-secrets" in masked.stderr


def assert_invalid(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("stdin, fragment", [
    ("this is not json", "not valid JSON"),
    ("[1, 2, 3]", "must be a JSON object"),
    ('{"schemaVersion": 1}', "break the stack-outputs contract"),
    ("1" * 100_000, "more than 100 digits"),
    ("[" * 100_000, "nested more than 64 levels"),
], ids=["text", "array", "partial", "huge-number", "deep"])
def test_cli_hostile_outputs_exit_2_with_one_line(stdin: str, fragment: str) -> None:
    assert_invalid(run_stdin("--outputs", "-", stdin=stdin), fragment)


@pytest.mark.slow
def test_cli_huge_values_and_bad_kubeconfig(healthy: FakeKubeApi, tmp_path: Path) -> None:
    outputs = healthy.outputs()
    outputs["topology"]["prefill"]["nodes"] = 10 ** 30
    outputs["modelId"] = "m" * 200_000
    result = run_stdin("--outputs", "-", stdin=json.dumps(outputs))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "[FAIL] gpu-nodes" in result.stdout
    broken = {**healthy.outputs(), "kubeconfig": f"users: [{{token: {DEFAULT_TOKEN}"}
    result = run_stdin("--outputs", "-", stdin=json.dumps(broken))
    assert_invalid(result, "not valid YAML")
    assert DEFAULT_TOKEN not in result.stderr
    missing = run_module("serve.verify", "--outputs", str(tmp_path / "nope.json"))
    assert_invalid(missing, "cannot read the outputs file")
    no_kubeconfig = run_module("serve.verify", "--outputs", str(write_outputs(tmp_path, healthy.outputs())),
                               "--kubeconfig", str(tmp_path / "absent"))
    assert_invalid(no_kubeconfig, "cannot read the kubeconfig file")


@pytest.mark.slow
def test_cli_refused_token_is_a_failed_check_without_the_token(healthy: FakeKubeApi) -> None:
    outputs = {**healthy.outputs(), "kubeconfig": healthy.kubeconfig(token="leaky-token-0042")}
    result = run_stdin("--outputs", "-", stdin=json.dumps(outputs))
    assert result.returncode == 1
    assert "the kubeconfig's credentials were refused" in result.stdout
    assert "leaky-token-0042" not in result.stdout + result.stderr


@pytest.mark.slow
def test_cli_mints_the_eks_token_and_never_runs_the_exec(tmp_path: Path) -> None:
    marker = tmp_path / "exec-was-run"
    script = tmp_path / "aws"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE",
               AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", PATH=f"{tmp_path}:{env.get('PATH', '')}")
    seen: list[str] = []

    def accept(token: str) -> bool:
        seen.append(token)
        return token.startswith("k8s-aws-v1.")

    with FakeKubeApi("healthy", accept_token=accept) as kube:
        outputs = kube.outputs(exec_command=str(script))
        result = run_stdin("--outputs", "-", "--json", stdin=json.dumps(outputs), env=env)
    # No Prometheus runs for this stand-in (its Service has no endpoint): the one failure, and
    # every other check got its evidence with the minted token.
    failed = [c["id"] for c in json.loads(result.stdout)["checks"] if c["status"] == "fail"]
    assert (result.returncode, failed) == (1, ["metrics-flowing"]), result.stdout + result.stderr
    assert not marker.exists(), "verify ran the kubeconfig's exec command"
    assert seen and all(token.startswith("k8s-aws-v1.") for token in seen)
    assert not any(token in result.stdout + result.stderr for token in seen)
    assert "wJalrXUtnFEMI" not in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("token, code", [(f"{DEFAULT_TOKEN}\n", 0), ("leaky-\x01-token-0042", 2),
                                         ("leaky-tök-token-0042", 2)], ids=["newline", "control", "umlaut"])
def test_cli_odd_token_bytes_never_reach_the_report(healthy: FakeKubeApi, token: str, code: int) -> None:
    outputs = {**healthy.outputs(), "kubeconfig": healthy.kubeconfig(fmt="json", token=token)}
    result = run_stdin("--outputs", "-", "--json", stdin=json.dumps(outputs))
    assert result.returncode == code, result.stdout + result.stderr
    for fragment in (token, token.strip(), "leaky", "0042"):
        assert fragment not in result.stdout + result.stderr
    if code == 2:
        assert "holds characters a bearer token cannot have" in result.stderr


# ---- what is compared: only what was read both times ----

TWO_DECODES = {"raypd:decode": {"replicas": 2}}


def decode_pods(kube: FakeKubeApi) -> list[str]:
    return sorted({str(r["_pod"]) for r in kube.replicas["decode"]})


def test_a_decode_page_read_only_after_the_chat_is_no_evidence_of_this_request() -> None:
    """A page that failed before the chat and answered after it shows lifetime counters, not this
    request's: with no transfer during the chat (stale export) the report must not pass."""
    with FakeKubeApi("metrics-stale", config=TWO_DECODES) as kube:
        first, second = decode_pods(kube)
        for replica in kube.replicas["decode"]:  # earlier traffic: lifetime totals on both pages
            kube._engines[replica["replica_id"]].update(transfers=5, external=85, generated=40)
        kube.metrics_failures[first] = 1  # the "before" read of this page fails, the next answers
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] == "warn", text
    assert f"pod {first} metrics" in text and "read only once" in text


def test_an_old_failure_on_a_page_read_once_is_not_this_requests_failure() -> None:
    with FakeKubeApi("healthy", config=TWO_DECODES) as kube:
        first, _ = decode_pods(kube)
        for replica in kube.replicas["decode"]:
            if replica["_pod"] == first:
                kube._engines[replica["replica_id"]]["failed"] = 3  # failed long ago
        kube.metrics_failures[first] = 1
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] != "fail", text
    assert "failed" not in text.split(";")[0] or "none failed" in text


def test_a_counter_that_restarted_counts_from_zero_not_negative() -> None:
    from serve.kv_evidence import kv_series, parse_vllm_samples
    from serve.verify import KvReading, compare_readings

    def page(transfers: int) -> str:
        return ("# TYPE vllm:nixl_xfer_time_seconds histogram\n"
                f'vllm:nixl_xfer_time_seconds_count{{engine="0",model_name="m"}} {transfers}\n')

    def reading(text: str) -> KvReading:
        return KvReading("m", {"pod a metrics": kv_series(parse_vllm_samples(text))}, "l", {})

    change = compare_readings(reading(page(9)), reading(page(2))).change
    assert change is not None and change.transfers == 2  # the engine restarted: 0 -> 2 since


def test_without_the_serve_api_prefill_work_on_a_shared_page_is_not_called_recompute() -> None:
    """No replica ids: every pod of the decode's worker group is read, prefill's series too, so
    local_compute there proves nothing; the transfer still does."""
    with FakeKubeApi("shared-node", dashboard=False) as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] == "pass", text
    assert "local_compute" not in text.split(";")[0] and "could not be identified" in text


def test_without_the_serve_api_no_transfer_is_a_warning_not_a_recompute_failure() -> None:
    with FakeKubeApi("no-kv-transfer", dashboard=False) as kube:
        report = run_verify(kube.outputs(), **FAST)
    text = detail(report, "kv-transfer")
    assert statuses(report)["kv-transfer"] == "warn", text
    assert "could not be identified" in text


def test_a_ray_log_that_starts_with_zero_is_read_as_it_is() -> None:
    """Ray 2.58/2.60's log API sends the file's bytes (no "1"/"0" prefix since ray PR #51787)."""
    from serve.evidence import Evidence, VerifyPlan
    from serve.kube import client_from_kubeconfig

    with FakeKubeApi("healthy", executor="mp") as kube:
        replica = kube.replicas["decode"][0]
        kube._actor_logs[replica["actor_id"]]["out"].insert(0, "0it [00:00, ?it/s]")
        ev = Evidence(client_from_kubeconfig(kube.kubeconfig()), VerifyPlan.from_outputs(kube.outputs()))
        text = ev.ray_log({"actor_id": replica["actor_id"], "suffix": "out"})
        report = run_verify(kube.outputs(), **FAST)
    assert text.splitlines()[0] == "0it [00:00, ?it/s]"
    assert statuses(report)["nixl-backend"] == "pass", detail(report, "nixl-backend")


def test_a_password_in_the_server_address_is_never_shown_nor_sent(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import yaml

    with FakeKubeApi("healthy") as kube:
        document = yaml.safe_load(kube.kubeconfig())
        port = kube.url.rsplit(":", 1)[1]
        # the server address with a user and password, pointing at a closed port: every error names it
        document["clusters"][0]["cluster"]["server"] = f"http://admin:hunter2pass@127.0.0.1:{free_closed_port()}"
        outputs = {**kube.outputs(), "kubeconfig": yaml.safe_dump(document)}
        with caplog.at_level(logging.DEBUG):
            report = run_verify(outputs, **FAST)
        document["clusters"][0]["cluster"]["server"] = f"http://admin:hunter2pass@127.0.0.1:{port}"
        working = run_verify({**kube.outputs(), "kubeconfig": yaml.safe_dump(document)}, **FAST)
        sent = json.dumps(kube.requests)
    everything = json.dumps(report.as_dict()) + json.dumps(working.as_dict()) + caplog.text
    assert statuses(report)["gpu-nodes"] == "fail" and "127.0.0.1" in detail(report, "gpu-nodes")
    assert statuses(working)["gpu-nodes"] == "pass"
    assert "hunter2pass" not in everything and "hunter2pass" not in sent and "admin:" not in everything


def free_closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
