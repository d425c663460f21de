"""The deployment namespace's NetworkPolicies, judged by who can reach what (tests/unit/network_policy_eval.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render import endpoint_names
from components.render.network_policy import (
    BENCHMARK_POD_LABELS,
    ROLLOUT_CHECK_POD_LABELS,
    pod_security_labels,
    pod_security_level,
    render_network_policies,
)
from components.render.rayservice import render_rayservice
from components.render.rollout import serve_rollout_job
from tests.unit.network_policy_eval import Address, Pod, may_reach

NAMESPACE, SERVICE = defaults.NAMESPACE, defaults.SERVICE_NAME
API_SERVER = "10.0.192.20"  # a control plane ENI
OTHER_VPC_ADDRESS = "10.0.5.9"  # a node or any pod elsewhere in the VPC


def policies(**extra: Any) -> list[dict[str, Any]]:
    return render_network_policies(NAMESPACE, SERVICE, api_server_cidrs=[f"{API_SERVER}/32"], **extra)


def manifest() -> dict[str, Any]:
    return render_rayservice(plan_deployment(DeploymentSpec()), f"{defaults.REGION}a")


def kuberay_pod(template: dict[str, Any], node_type: str, cluster: str, group: str) -> Pod:
    """A Ray pod labelled as KubeRay labels it (ray-operator/controllers/ray/common/pod.go
    `labelPod`, v1.4.0): its own labels, then the template's (which cannot override these three)."""
    labels = {**(template.get("metadata") or {}).get("labels", {}),
              "ray.io/node-type": node_type, "ray.io/cluster": cluster, "ray.io/group": group,
              "ray.io/is-ray-node": "yes", "app.kubernetes.io/name": "kuberay",
              "app.kubernetes.io/created-by": "kuberay-operator"}
    return Pod(NAMESPACE, labels, ip="10.0.2.10")


def head(cluster: str = f"{SERVICE}-abc12") -> Pod:
    config = manifest()["spec"]["rayClusterConfig"]
    return kuberay_pod(config["headGroupSpec"]["template"], "head", cluster, "headgroup")


def worker(cluster: str = f"{SERVICE}-abc12") -> Pod:
    group = manifest()["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    return kuberay_pod(group["template"], "worker", cluster, group["groupName"])


OPERATOR = Pod(defaults.KUBERAY_NAMESPACE, {"app.kubernetes.io/name": "kuberay-operator",
                                            "app.kubernetes.io/instance": "kuberay-operator"})
GATEWAY_PROXY = Pod(endpoint_names.GATEWAY_NAMESPACE, {
    endpoint_names.OWNING_GATEWAY_NAME_LABEL: endpoint_names.gateway_name(SERVICE),
    endpoint_names.OWNING_GATEWAY_NAMESPACE_LABEL: NAMESPACE,
    "app.kubernetes.io/name": "envoy"})
RANDOM_POD = Pod("default", {"app": "something"})
SAME_NAMESPACE_POD = Pod(NAMESPACE, {"app": "something"})


def rollout_check_pod() -> Pod:
    job = serve_rollout_job(manifest())
    return Pod(NAMESPACE, {**job["spec"]["template"]["metadata"]["labels"], "job-name": job["metadata"]["name"]})


def benchmark_pod() -> Pod:
    from serve.benchmark.job import render_benchmark_job

    outputs = {"namespace": NAMESPACE, "image": "example.com/ray:1", "modelId": "m",
               "openaiBaseUrl": f"http://{SERVICE}-serve-svc.{NAMESPACE}.svc.cluster.local:8000/v1"}
    job = render_benchmark_job(outputs, "bench-1", ["--rate", "1"], {})[1]
    return Pod(NAMESPACE, dict(job["spec"]["template"]["metadata"]["labels"]))


@pytest.mark.parametrize("port", defaults.RAY_HEAD_CONTROL_PORTS)
def test_a_random_pod_reaches_none_of_the_head_control_ports(port):
    assert not may_reach(policies(), RANDOM_POD, head(), port)
    assert not may_reach(policies(), SAME_NAMESPACE_POD, head(), port)


@pytest.mark.parametrize("port", defaults.RAY_HEAD_CONTROL_PORTS)
def test_the_ray_cluster_reaches_its_head_on_every_control_port(port):
    assert may_reach(policies(), worker(), head(), port)


def test_workers_accept_the_ray_cluster_on_any_port_and_nobody_else():
    # Ray's worker and NIXL side-channel ports are random.
    for port in (10002, 19999, 45678):
        assert may_reach(policies(), head(), worker(), port)
        assert may_reach(policies(), worker(), worker(), port)
        assert not may_reach(policies(), RANDOM_POD, worker(), port)
        assert not may_reach(policies(), GATEWAY_PROXY, worker(), port)


def test_a_new_cluster_generation_talks_to_the_old_one_during_a_switch():
    # NewCluster upgrades give the RayCluster a new name (ray.io/cluster); the pods still agree.
    assert may_reach(policies(), worker(f"{SERVICE}-new99"), head(f"{SERVICE}-abc12"), defaults.GCS_PORT)


def test_the_operator_reaches_the_dashboard_and_the_serve_proxy_only():
    assert may_reach(policies(), OPERATOR, head(), defaults.DASHBOARD_PORT)
    # KubeRay checks the head's Serve proxy health on the pod IP (updateHeadPodServeLabel).
    assert may_reach(policies(), OPERATOR, head(), defaults.SERVE_PORT)
    assert not may_reach(policies(), OPERATOR, head(), defaults.GCS_PORT)
    assert not may_reach(policies(), OPERATOR, head(), defaults.CLIENT_PORT)
    # The operator's labels in another namespace are not the operator.
    impostor = Pod("default", dict(OPERATOR.labels))
    assert not may_reach(policies(), impostor, head(), defaults.DASHBOARD_PORT)


def test_the_rollout_check_job_reaches_the_dashboard_and_nothing_else():
    assert ROLLOUT_CHECK_POD_LABELS.items() <= rollout_check_pod().labels.items()
    assert may_reach(policies(), rollout_check_pod(), head(), defaults.DASHBOARD_PORT)
    assert not may_reach(policies(), rollout_check_pod(), head(), defaults.CLIENT_PORT)


def test_the_gateway_and_the_benchmark_reach_the_serve_port_and_only_the_benchmark_the_dashboard():
    assert BENCHMARK_POD_LABELS.items() <= benchmark_pod().labels.items()
    for client in (GATEWAY_PROXY, benchmark_pod()):
        assert may_reach(policies(), client, head(), defaults.SERVE_PORT)
        assert may_reach(policies(), client, worker(), defaults.SERVE_PORT)
        assert not may_reach(policies(), client, head(), defaults.GCS_PORT)
        assert not may_reach(policies(), client, head(), defaults.CLIENT_PORT)
    # A scheduled benchmark samples Serve's replicas from the REST API on the head's dashboard.
    assert may_reach(policies(), benchmark_pod(), head(), defaults.DASHBOARD_PORT)
    assert not may_reach(policies(), GATEWAY_PROXY, head(), defaults.DASHBOARD_PORT)


def test_another_services_gateway_does_not_reach_this_serve_port():
    other = Pod(endpoint_names.GATEWAY_NAMESPACE, {
        endpoint_names.OWNING_GATEWAY_NAME_LABEL: endpoint_names.gateway_name("other"),
        endpoint_names.OWNING_GATEWAY_NAMESPACE_LABEL: NAMESPACE})
    assert not may_reach(policies(), other, head(), defaults.SERVE_PORT)


def test_listed_client_namespaces_reach_serve_and_nothing_more():
    rules = policies(client_namespaces=("apps",))
    app = Pod("apps", {"app": "chatbot"})
    assert may_reach(rules, app, worker(), defaults.SERVE_PORT)
    assert not may_reach(rules, app, head(), defaults.DASHBOARD_PORT)
    assert not may_reach(policies(), app, worker(), defaults.SERVE_PORT)


def test_the_api_server_reaches_what_verify_proxies_to_and_no_other_vpc_address_does():
    api = Address(API_SERVER)
    assert may_reach(policies(), api, head(), defaults.DASHBOARD_PORT)
    assert may_reach(policies(), api, head(), defaults.SERVE_PORT)
    assert may_reach(policies(), api, worker(), defaults.RAY_METRICS_PORT)
    assert not may_reach(policies(), api, head(), defaults.GCS_PORT)
    assert not may_reach(policies(), api, head(), defaults.CLIENT_PORT)
    for port in (defaults.DASHBOARD_PORT, defaults.SERVE_PORT, defaults.RAY_METRICS_PORT):
        assert not may_reach(policies(), Address(OTHER_VPC_ADDRESS), head(), port)


def test_without_known_api_server_addresses_no_address_is_admitted():
    rules = render_network_policies(NAMESPACE, SERVICE, api_server_cidrs=[])
    assert not may_reach(rules, Address(API_SERVER), head(), defaults.DASHBOARD_PORT)
    assert not any(rule.get("from") == [] for p in rules for rule in p["spec"]["ingress"])


def test_metrics_scrapers_are_a_hook_for_prometheus():
    prometheus = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    rules = policies(metrics_peers=[prometheus])
    scraper = Pod("monitoring", {"app": "prometheus"})
    assert may_reach(rules, scraper, worker(), defaults.RAY_METRICS_PORT)
    assert not may_reach(rules, scraper, head(), defaults.DASHBOARD_PORT)
    assert not may_reach(policies(), scraper, worker(), defaults.RAY_METRICS_PORT)


def test_other_namespaces_are_not_touched():
    assert {p["metadata"]["namespace"] for p in policies()} == {NAMESPACE}
    bystander = Pod("default", {"app": "web"})
    assert may_reach(policies(), RANDOM_POD, bystander, 80)


def test_the_namespace_is_privileged_because_the_nixl_workers_are():
    assert pod_security_level(manifest()) == "privileged"
    unprivileged = manifest()
    for group in unprivileged["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        group["template"]["spec"]["containers"][0].pop("securityContext")
    assert pod_security_level(unprivileged) == "baseline"


def test_pod_security_labels_enforce_audit_and_warn_at_one_pinned_version():
    labels = pod_security_labels("restricted", "v1.35")
    assert labels == {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/audit": "restricted",
        "pod-security.kubernetes.io/audit-version": "v1.35",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/warn-version": "v1.35",
    }
    with pytest.raises(ValueError, match="unknown Pod Security level"):
        pod_security_labels("strict")
