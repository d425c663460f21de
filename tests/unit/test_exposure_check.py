"""Verify's dashboard-exposure check against the Kubernetes stand-in (tests/fakes/kube_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.checks import VERIFY_IDS
from serve.verify import run_verify
from tests.fakes.kube_api import FakeKubeApi, service_object

FAST = {"kv_wait_seconds": 0, "timeout": 5}
ID = "dashboard-exposure"


def exposure(kube: FakeKubeApi):
    report = run_verify(kube.outputs(), **FAST)
    (check,) = [c for c in report.checks if c.id == ID]
    return check


def head_selector(kube: FakeKubeApi) -> dict[str, str]:
    return {"ray.io/cluster": kube.ray_cluster, "ray.io/node-type": "head"}


def envoy_lb() -> dict[str, Any]:
    """The gateway's proxy Service (slice A's endpoint): a LoadBalancer in front of Envoy."""
    return service_object("envoy-gateway-system", "envoy-inference-ray-llm-gateway",
                          {"gateway.envoyproxy.io/owning-gateway-name": "ray-llm-gateway"},
                          [{"name": "https", "port": 443, "targetPort": 10443}], kind="LoadBalancer")


def http_route(kube: FakeKubeApi, service: str, port: int, namespace: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": service, "port": port}
    if namespace:
        ref["namespace"] = namespace
    return {"metadata": {"name": "r1", "namespace": namespace or kube.spec.namespace},
            "spec": {"parentRefs": [{"name": "ray-llm-gateway"}],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                                "backendRefs": [ref]}]}}


def test_the_check_is_a_contract_5_verify_id_after_the_endpoint_checks():
    # Contract 5's order: ..., kv-transfer, endpoint-external, endpoint-auth, dashboard-exposure
    assert VERIFY_IDS.index(ID) == VERIFY_IDS.index("endpoint-auth") + 1


def test_a_stack_with_only_its_own_services_passes_with_the_evidence_listed():
    with FakeKubeApi("healthy") as kube:
        kube.exposure.services.append(envoy_lb())
        check = exposure(kube)
    assert check.status == "pass", check.detail
    assert "5 Services" not in check.detail and "6 Services" in check.detail
    assert "envoy-gateway-system/envoy-inference-ray-llm-gateway (LoadBalancer)" in check.detail
    assert "HTTPRoute: not installed" in check.detail and "0 Ingresses" in check.detail
    assert "ray-llm-head-svc" in check.detail


@pytest.mark.parametrize("kind, port", [
    ("LoadBalancer", {"name": "dash", "port": 80, "targetPort": 8265}),
    ("NodePort", {"name": "x", "port": 9000, "targetPort": "dashboard"}),
    ("LoadBalancer", {"name": "gcs", "port": 6379}),
    ("NodePort", {"name": "client", "port": 10001}),
])
def test_a_load_balancer_or_node_port_on_the_head_fails_naming_it(kind, port):
    with FakeKubeApi("healthy") as kube:
        kube.exposure.services.append(service_object(kube.spec.namespace, "ray-dash-public",
                                                     head_selector(kube), [port], kind=kind))
        check = exposure(kube)
    assert check.status == "fail"
    assert f"Service {kube.spec.namespace}/ray-dash-public ({kind})" in check.detail
    assert check.remedy


def test_external_ips_count_as_exposure():
    with FakeKubeApi("healthy") as kube:
        kube.exposure.services.append(service_object(
            kube.spec.namespace, "ray-ext", head_selector(kube), [{"port": 8265}],
            externalIPs=["203.0.113.9"]))
        check = exposure(kube)
    assert check.status == "fail" and "ray-ext (externalIPs)" in check.detail


def test_a_load_balancer_on_the_serve_port_is_not_the_dashboard():
    with FakeKubeApi("healthy") as kube:
        kube.exposure.services.append(service_object(
            kube.spec.namespace, "ray-serve-lb", head_selector(kube), [{"port": 80, "targetPort": 8000}],
            kind="LoadBalancer"))
        check = exposure(kube)
    assert check.status == "pass", check.detail


def test_an_ingress_to_the_head_service_fails_and_one_to_serve_passes():
    with FakeKubeApi("healthy") as kube:
        ns = kube.spec.namespace
        kube.exposure.ingresses.append({"metadata": {"name": "api", "namespace": ns}, "spec": {"rules": [
            {"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                "service": {"name": f"{kube.spec.service_name}-serve-svc", "port": {"number": 8000}}}}]}}]}})
        assert exposure(kube).status == "pass"
        kube.exposure.ingresses.append({"metadata": {"name": "dash", "namespace": ns}, "spec": {
            "defaultBackend": {"service": {"name": f"{kube.ray_cluster}-head-svc", "port": {"name": "dashboard"}}}}})
        check = exposure(kube)
    assert check.status == "fail"
    assert f"Ingress {ns}/dash routes to Service {kube.ray_cluster}-head-svc port dashboard" in check.detail


def test_gateway_api_routes_are_read_where_installed():
    with FakeKubeApi("healthy") as kube:
        kube.exposure.routes[("v1", "httproutes")] = [http_route(kube, "ray-llm-serve-svc", 8000)]
        kube.exposure.routes[("v1alpha2", "tlsroutes")] = []
        check = exposure(kube)
        assert check.status == "pass", check.detail
        assert "1 HTTPRoutes" in check.detail and "0 TLSRoutes" in check.detail
        assert "GRPCRoute: not installed" in check.detail
        kube.exposure.routes[("v1", "httproutes")].append(http_route(kube, "ray-llm-head-svc", 8265))
        failed = exposure(kube)
    assert failed.status == "fail"
    assert "HTTPRoute inference/r1 routes to Service ray-llm-head-svc port 8265" in failed.detail


def test_a_route_in_another_namespace_naming_the_head_service_there_fails():
    with FakeKubeApi("healthy") as kube:
        route = http_route(kube, "ray-llm-head-svc", 10001, namespace=kube.spec.namespace)
        route["metadata"]["namespace"] = "apps"
        kube.exposure.routes[("v1alpha2", "tcproutes")] = [route]
        check = exposure(kube)
    assert check.status == "fail" and "TCPRoute apps/r1" in check.detail


def test_a_refused_list_is_missing_evidence_never_a_pass():
    with FakeKubeApi("healthy") as kube:
        kube.exposure.forbidden.add("/apis/networking.k8s.io/v1/ingresses")
        check = exposure(kube)
        assert check.status == "warn" and "could not list Ingresses" in check.detail
        kube.exposure.forbidden.add("/api/v1/services")
        check = exposure(kube)
    assert check.status == "warn" and "could not list Services" in check.detail


def test_the_lists_asked_for_are_cluster_wide():
    with FakeKubeApi("healthy") as kube:
        exposure(kube)
        paths = {r["path"] for r in kube.requests}
    assert {"/api/v1/services", "/apis/networking.k8s.io/v1/ingresses",
            "/apis/gateway.networking.k8s.io/v1/httproutes",
            "/apis/gateway.networking.k8s.io/v1alpha2/tlsroutes"} <= paths
