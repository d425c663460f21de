"""Lock-down under the mock runtime (issue 17 §3): NetworkPolicies, the VPC CNI's policy agent,
Pod Security labels; judged on what the engine would receive."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import defaults
from components.render import endpoint_names
from components.render.rayservice import RAY_SERVICE_LABEL
from tests.unit.network_policy_eval import Address, Pod, may_reach

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def policies(plan) -> list[dict[str, Any]]:
    return [{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": r["inputs"]["metadata"], "spec": r["inputs"]["spec"]}
            for r in plan.of_type(POLICY)]


def ray_pods(plan) -> list[Pod]:
    (service,) = plan.of_type("kubernetes:ray.io/v1:RayService")
    config = service["inputs"]["spec"]["rayClusterConfig"]
    templates = [("head", config["headGroupSpec"]["template"])] + [
        ("worker", group["template"]) for group in config["workerGroupSpecs"]]
    return [Pod(defaults.NAMESPACE, {**template["metadata"]["labels"], "ray.io/node-type": kind,
                                     "ray.io/cluster": "ray-llm-x1"})
            for kind, template in templates]


def test_the_vpc_cni_enforces_network_policies(reference_plan):
    (cluster,) = reference_plan.of_type("eks:index:Cluster")
    assert cluster["inputs"]["vpcCniOptions"]["enableNetworkPolicy"] is True


def test_policies_exist_before_the_rayservice_and_after_its_namespace(reference_plan):
    names = {r["name"] for r in reference_plan.of_type(POLICY)}
    assert len(names) == 6  # with the head's metrics ports for Prometheus (issue 18)
    (service,) = reference_plan.of_type("kubernetes:ray.io/v1:RayService")
    assert names <= set(service["dependsOn"])
    for policy in reference_plan.of_type(POLICY):
        assert "pd-service-namespace" in policy["dependsOn"]


def test_every_ray_pod_is_selected_by_the_rendered_policies(reference_plan):
    pods = ray_pods(reference_plan)
    assert all(pod.labels[RAY_SERVICE_LABEL] == defaults.SERVICE_NAME for pod in pods)
    head = pods[0]
    stranger = Pod("default", {"app": "x"})
    assert not may_reach(policies(reference_plan), stranger, head, defaults.DASHBOARD_PORT)
    assert may_reach(policies(reference_plan), pods[-1], head, defaults.GCS_PORT)


def test_the_api_server_rule_names_the_control_plane_enis_not_the_vpc(reference_plan):
    (dashboard,) = [p for p in policies(reference_plan) if p["metadata"]["name"].endswith("ray-dashboard")]
    blocks = [peer["ipBlock"]["cidr"] for rule in dashboard["spec"]["ingress"]
              for peer in rule["from"] if "ipBlock" in peer]
    assert len(blocks) == 2 and all(block.endswith("/32") for block in blocks)
    head = ray_pods(reference_plan)[0]
    eni = blocks[0].removesuffix("/32")
    assert may_reach(policies(reference_plan), Address(eni), head, defaults.DASHBOARD_PORT)
    assert not may_reach(policies(reference_plan), Address("10.0.3.4"), head, defaults.DASHBOARD_PORT)


def test_in_cluster_clients_reach_the_serve_port(make_plan):
    plan = make_plan({"raypd:inClusterClients": ["apps"]})
    worker = ray_pods(plan)[-1]
    assert may_reach(policies(plan), Pod("apps"), worker, defaults.SERVE_PORT)
    assert not may_reach(policies(plan), Pod("apps"), ray_pods(plan)[0], defaults.DASHBOARD_PORT)


@pytest.mark.parametrize("mode", ["enforce", "audit", "warn"])
def test_the_deployment_namespace_is_privileged_and_the_operators_restricted(reference_plan, mode):
    namespace = reference_plan.named("pd-service-namespace")["inputs"]["metadata"]["labels"]
    assert namespace[f"pod-security.kubernetes.io/{mode}"] == "privileged"
    assert namespace[f"pod-security.kubernetes.io/{mode}-version"] == f"v{defaults.KUBERNETES_VERSION}"
    patch = reference_plan.named(f"{defaults.KUBERAY_NAMESPACE}-pod-security")
    assert patch["type"] == "kubernetes:core/v1:NamespacePatch"
    assert patch["inputs"]["metadata"]["name"] == defaults.KUBERAY_NAMESPACE
    assert patch["inputs"]["metadata"]["labels"][f"pod-security.kubernetes.io/{mode}"] == "restricted"
    # Helm creates that namespace: the patch comes after the release.
    assert "addons-kuberay-operator" in patch["dependsOn"]


def test_the_gateway_namespace_admits_baseline_pods_only(reference_plan):
    patch = reference_plan.named("endpoint-gateway-pod-security")
    assert patch["type"] == "kubernetes:core/v1:NamespacePatch"
    assert patch["inputs"]["metadata"]["name"] == endpoint_names.GATEWAY_NAMESPACE
    labels = patch["inputs"]["metadata"]["labels"]
    assert {labels[f"pod-security.kubernetes.io/{mode}"] for mode in ("enforce", "audit", "warn")} == {"baseline"}
    assert "endpoint-envoy-gateway" in patch["dependsOn"]  # Helm creates the namespace first


def test_nothing_labels_kube_system(reference_plan):
    for resource in reference_plan.resources:
        metadata = (resource["inputs"] or {}).get("metadata") or {}
        if isinstance(metadata, dict) and metadata.get("name") == "kube-system":
            pytest.fail(f"{resource['name']} touches kube-system")


def test_the_api_server_addresses_are_the_eks_enis_of_the_clusters_vpc():
    from pulumi.runtime import mocks

    from components.config.spec import DeploymentSpec
    from components.stack.cluster import control_plane_cidrs
    from components.stack.mockrun import PlanMocks, run_program
    from components.stack.program import build

    class Recording(PlanMocks):
        def __init__(self, region: str):
            super().__init__(region)
            self.filters: list[Any] = []

        def call(self, args: mocks.MockCallArgs) -> dict[str, Any]:  # type: ignore[override]
            if args.token == "aws:ec2/getNetworkInterfaces:getNetworkInterfaces":
                self.filters.append(args.args.get("filters"))
            return super().call(args)

    spec = DeploymentSpec()
    mock = Recording(spec.region)
    run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region, mock=mock)
    (filters,) = mock.filters
    by_name = {f["name"]: f["values"] for f in filters}
    assert by_name["description"] == [f"Amazon EKS {spec.effective_cluster_name}"]
    assert by_name["vpc-id"][0].startswith("vpc-")
    # Every address once, as a /32, in a stable order.
    assert control_plane_cidrs([["10.0.1.9", "10.0.0.5"], ["10.0.1.9"]]) == ["10.0.0.5/32", "10.0.1.9/32"]
    assert control_plane_cidrs([]) == []
