"""The endpoint under the mock runtime (issue 17): which objects each scope registers, how they
depend on each other, the API-key Secret Pulumi leaves to the web app, and the outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.render import endpoint_names
from components.render.outputs import validate_outputs

CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"
INTERNET = {"raypd:endpoint": {"scope": "internet", "certificateArn": CERT,
                               "allowedCidrs": ["203.0.113.0/24"]}}
CLUSTER_OPEN = {"raypd:endpoint": {"scope": "cluster", "auth": "none"}}
RELEASE = "kubernetes:helm.sh/v3:Release"
GATEWAY_KINDS = {
    "kubernetes:gateway.networking.k8s.io/v1:GatewayClass",
    "kubernetes:gateway.networking.k8s.io/v1:Gateway",
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute",
    "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy",
    "kubernetes:gateway.envoyproxy.io/v1alpha1:ClientTrafficPolicy",
    "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy",
    "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy",
}


@pytest.fixture(scope="module")
def internet_plan(make_plan):
    return make_plan(INTERNET)


@pytest.fixture(scope="module")
def open_cluster_plan(make_plan):
    return make_plan(CLUSTER_OPEN)


def releases(plan) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["chart"]: r for r in plan.of_type(RELEASE)}


def full_document(plan) -> dict[str, Any]:
    document = {k: v for k, v in plan.outputs.items()}
    return document


def test_the_reference_stack_registers_every_gateway_object_and_both_controllers(reference_plan):
    assert GATEWAY_KINDS <= {r["type"] for r in reference_plan.resources}
    charts = releases(reference_plan)
    assert {"oci://docker.io/envoyproxy/gateway-helm", "aws-load-balancer-controller"} <= set(charts)
    for chart in ("oci://docker.io/envoyproxy/gateway-helm", "aws-load-balancer-controller"):
        assert charts[chart]["inputs"]["skipCrds"] is True  # the CRDs are Pulumi's (see addons)


def test_each_chart_waits_for_its_own_crds(reference_plan):
    charts = releases(reference_plan)
    assert "endpoint-envoy-gateway-crds" in charts["oci://docker.io/envoyproxy/gateway-helm"]["dependsOn"]
    assert "lb-controller-crds" in charts["aws-load-balancer-controller"]["dependsOn"]
    crds = reference_plan.named("endpoint-envoy-gateway-crds")["inputs"]["files"]
    assert any(f.endswith("/v1.9.0/charts/gateway-helm/charts/crds/crds/gatewayapi-crds.yaml") for f in crds)


def test_the_lb_controller_gets_an_irsa_role_with_the_published_policy(reference_plan):
    from components.render.endpoint_lb import lb_controller_iam_policy

    role = reference_plan.named("lb-controller-role")
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    (condition,) = [s["Condition"]["StringEquals"] for s in trust["Statement"]]
    assert "system:serviceaccount:kube-system:aws-load-balancer-controller" in condition.values()
    policy = reference_plan.named("lb-controller-policy")
    assert json.loads(policy["inputs"]["policy"]) == lb_controller_iam_policy()
    values = releases(reference_plan)["aws-load-balancer-controller"]["inputs"]["values"]
    assert values["clusterName"] == reference_plan.outputs["clusterName"] and values["region"] == "us-east-2"
    assert values["vpcId"].startswith("vpc-")
    assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_scope_cluster_has_no_load_balancer_controller_and_auth_none_no_keys(open_cluster_plan):
    assert "aws-load-balancer-controller" not in releases(open_cluster_plan)
    types = {r["type"] for r in open_cluster_plan.resources}
    assert "kubernetes:core/v1:Service" not in types  # no NLB
    assert "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy" not in types
    # No API key is generated (the one RandomString left is GCS fault tolerance's Redis token).
    assert [r["name"] for r in open_cluster_plan.of_type("random:index/randomString:RandomString")
            if not r["name"].startswith("gcs-")] == []
    assert "apiKey" not in open_cluster_plan.outputs
    assert open_cluster_plan.outputs["endpoint"] == {
        "url": "http://ray-llm-gateway.envoy-gateway-system.svc.cluster.local/v1",
        "scope": "cluster", "auth": "none"}


def test_the_first_key_is_a_secret_in_a_secret_pulumi_never_reverts(reference_plan):
    secret = reference_plan.named("endpoint-api-keys")
    meta = secret["inputs"]["metadata"]
    assert meta["name"] == endpoint_names.api_keys_secret_name("ray-llm")
    assert meta["namespace"] == "inference"
    assert endpoint_names.created_annotation(endpoint_names.FIRST_KEY_NAME) in meta["annotations"]
    assert secret["inputs"]["stringData"] == "[secret]"
    assert "endpoint-first-api-key" in secret["dependsOn"]
    assert reference_plan.outputs["apiKey"] == "[secret]"


def test_the_secret_ignores_later_changes_to_its_keys(reference_plan):
    # Keys added or revoked by the web app are never put back or removed by `pulumi up`.
    ignored = set(reference_plan.named("endpoint-api-keys").get("ignoreChanges", []))
    assert {"data", "stringData", "metadata.annotations"} <= ignored


def test_the_route_comes_last_after_the_keys_and_policies(reference_plan):
    route = reference_plan.named("endpoint-route")
    assert {"endpoint-gateway", "endpoint-security-policy", "endpoint-api-keys",
            "endpoint-client-policy", "endpoint-backend-policy"} <= set(route["dependsOn"])


def test_the_gateway_waits_for_the_proxy_config_and_the_nlb_for_the_gateway_and_the_lb_controller(
        reference_plan):
    gateway = reference_plan.named("endpoint-gateway")
    assert {"endpoint-envoy-proxy", "endpoint-gateway-class"} <= set(gateway["dependsOn"])
    nlb = reference_plan.named("endpoint-nlb-vpc")
    assert {"endpoint-gateway", "lb-controller-release"} <= set(nlb["dependsOn"])


def test_internet_puts_the_nlb_in_the_public_subnets_and_answers_https(internet_plan):
    nlb = internet_plan.named("endpoint-nlb-internet")
    assert set(nlb["dependsOn"]) >= {"network-public-us-east-2a", "network-public-us-east-2b"}
    annotations = nlb["inputs"]["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    url = internet_plan.outputs["endpoint"]["url"]
    assert url.startswith("https://k8s-") and url.endswith(".elb.us-east-2.amazonaws.com/v1")


def test_the_vpc_default_answers_plain_http_on_the_internal_nlb(reference_plan):
    nlb = reference_plan.named("endpoint-nlb-vpc")
    assert {"network-private-us-east-2a", "network-private-us-east-2b"} <= set(nlb["dependsOn"])
    assert reference_plan.outputs["endpoint"]["url"].startswith("http://k8s-")
    assert reference_plan.outputs["endpoint"]["scope"] == "vpc"


@pytest.mark.parametrize("fixture", ["reference_plan", "internet_plan", "open_cluster_plan"])
def test_the_outputs_validate_against_the_schema(fixture, request):
    plan = request.getfixturevalue(fixture)
    document = dict(plan.outputs)
    document["kubeconfig"] = "[secret]"
    validate_outputs(document)


def test_no_service_port_or_route_of_the_plan_reaches_a_ray_control_port(reference_plan, internet_plan):
    for plan in (reference_plan, internet_plan):
        for resource in plan.resources:
            if resource["type"] in GATEWAY_KINDS:
                text = json.dumps(resource["inputs"])
                for port in (8265, 10001, 6379):
                    assert f'"port": {port}' not in text, (resource["name"], port)


def test_the_readable_plan_says_who_reaches_the_endpoint(reference_plan, open_cluster_plan):
    from components.stack.offline_plan import render_summary

    (line,) = [x for x in render_summary(reference_plan.document).splitlines() if x.startswith("Endpoint:")]
    assert line.startswith("Endpoint: scope vpc, internal NLB from 10.0.0.0/16, auth apiKey, http://k8s-")
    (line,) = [x for x in render_summary(open_cluster_plan.document).splitlines()
               if x.startswith("Endpoint:")]
    assert "pods in the cluster only" in line and "auth none" in line
