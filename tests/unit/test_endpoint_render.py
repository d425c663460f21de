"""The endpoint's gateway objects, NLB Service and chart values (components.render.endpoint,
components.render.endpoint_lb): valid for the upstream CRD schemas and chart values, only /v1 routed
to Serve, no Ray port exposed, and every timeout that can end a silent stream at least 10 minutes."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import endpoint_names
from components.render.endpoint import FORBIDDEN_PORTS, endpoint_output, gateway_objects, path_timeouts
from components.render.endpoint_lb import (
    envoy_gateway_values,
    lb_controller_iam_policy,
    lb_controller_values,
    nlb_service,
)
from tests.strict_schema import strict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"
SUBNETS = ["subnet-0aaa", "subnet-0bbb"]
SCOPES: dict[str, dict[str, Any]] = {
    "vpc": {},
    "vpc-tls": {"scope": "vpc", "certificateArn": CERT, "host": "llm.internal.example.com"},
    "internet": {"scope": "internet", "certificateArn": CERT, "allowedCidrs": ["203.0.113.0/24"]},
    "cluster": {"scope": "cluster"},
    "cluster-open": {"scope": "cluster", "auth": "none"},
}
CRD_FILES = {
    "GatewayClass": "gateway.networking.k8s.io_gatewayclasses.yaml",
    "Gateway": "gateway.networking.k8s.io_gateways.yaml",
    "HTTPRoute": "gateway.networking.k8s.io_httproutes.yaml",
    "EnvoyProxy": "gateway.envoyproxy.io_envoyproxies.yaml",
    "SecurityPolicy": "gateway.envoyproxy.io_securitypolicies.yaml",
    "ClientTrafficPolicy": "gateway.envoyproxy.io_clienttrafficpolicies.yaml",
    "BackendTrafficPolicy": "gateway.envoyproxy.io_backendtrafficpolicies.yaml",
}


def spec_of(name: str) -> DeploymentSpec:
    config = {"raypd:endpoint": SCOPES[name]} if SCOPES[name] else {}
    return DeploymentSpec.from_config(config, "dev")


def objects_of(name: str) -> dict[str, dict[str, Any]]:
    return gateway_objects(spec_of(name))


def nlb_of(name: str) -> Any:
    return nlb_service(spec_of(name), SUBNETS)


def timeouts_of(name: str) -> Any:
    return path_timeouts(objects_of(name), nlb_of(name))


@lru_cache(maxsize=None)
def crd_schema(kind: str, version: str) -> dict[str, Any]:
    text = (FIXTURES / "crds" / CRD_FILES[kind]).read_text(encoding="utf-8")
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta is not in the CRD
    return schema


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_every_object_fits_its_upstream_crd_schema(scope):
    for role, manifest in objects_of(scope).items():
        version = manifest["apiVersion"].split("/")[1]
        errors = list(jsonschema.Draft7Validator(crd_schema(manifest["kind"], version)).iter_errors(manifest))
        assert not errors, f"{scope} {role}: " + "; ".join(
            f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5])


def test_the_strict_schema_catches_a_misspelt_timeout():
    manifest = objects_of("vpc")["client-policy"]
    manifest["spec"]["timeout"]["http"]["streamIdleTimout"] = "900s"
    assert list(jsonschema.Draft7Validator(crd_schema("ClientTrafficPolicy", "v1alpha1")).iter_errors(manifest))


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_only_the_api_prefix_reaches_the_serve_port_and_no_ray_port_is_exposed(scope):
    objects = objects_of(scope)
    (rule,) = objects["route"]["spec"]["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/v1"}}]
    assert rule["backendRefs"] == [{"name": "ray-llm-serve-svc", "port": defaults.SERVE_PORT}]
    ports = [listener["port"] for listener in objects["gateway"]["spec"]["listeners"]]
    ports += [ref["port"] for r in objects["route"]["spec"]["rules"] for ref in r["backendRefs"]]
    service = nlb_of(scope) or {"metadata": {}, "spec": {"ports": []}}
    ports += [p[key] for p in service["spec"]["ports"] for key in ("port", "targetPort")]
    annotations = service["metadata"].get("annotations", {})
    assert not set(ports) & set(FORBIDDEN_PORTS)
    assert not any(str(port) in value for value in annotations.values() for port in FORBIDDEN_PORTS)


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_every_timeout_that_can_end_a_silent_stream_is_at_least_ten_minutes(scope):
    timeouts = timeouts_of(scope)
    assert {t.where for t in timeouts} >= {
        "client streamIdleTimeout", "client idleTimeout", "backend streamIdleTimeout", "route request"}
    short = [t for t in timeouts if t.seconds is not None and 0 < t.seconds < 600]
    assert not short


def test_a_plain_http_load_balancer_gets_its_tcp_idle_timeout_raised_and_tls_keeps_alive():
    vpc = timeouts_of("vpc")
    assert [t.seconds for t in vpc if t.where == "nlb TCP-80"] == [defaults.NLB_TCP_IDLE_TIMEOUT_SECONDS]
    assert 60 <= defaults.NLB_TCP_IDLE_TIMEOUT_SECONDS <= 6000  # AWS's allowed range
    # A TLS listener's idle timeout is fixed at 350 s: TCP keepalive probes must come sooner.
    internet = objects_of("internet")
    keepalive = internet["client-policy"]["spec"]["tcpKeepalive"]
    assert int(keepalive["idleTime"].rstrip("s")) < 350
    assert not any("listener-attributes" in key for key in nlb_of("internet")["metadata"]["annotations"])


def test_envoy_drops_idle_upstream_connections_before_ray_serve_does():
    backend = objects_of("vpc")["backend-policy"]["spec"]["timeout"]["http"]
    assert int(backend["connectionIdleTimeout"].rstrip("s")) < 90  # Serve's uvicorn keep-alive


def test_vpc_is_an_internal_nlb_on_ip_targets_limited_to_the_vpc():
    service = nlb_of("vpc")
    a = service["metadata"]["annotations"]
    assert service["spec"]["type"] == "LoadBalancer" and service["metadata"]["name"] == "ray-llm-nlb-vpc"
    assert service["spec"]["loadBalancerClass"] == "service.k8s.aws/nlb"
    assert a["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert a["service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"] == "ip"
    assert a["service.beta.kubernetes.io/aws-load-balancer-type"] == "external"
    assert a["service.beta.kubernetes.io/aws-load-balancer-subnets"] == "subnet-0aaa,subnet-0bbb"
    # Source ranges apply to IP targets only with client IP preservation (controller docs).
    assert "preserve_client_ip.enabled=true" in a[
        "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"]
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/16"]
    assert not any("ssl" in key for key in a)
    assert objects_of("vpc")["gateway"]["spec"]["listeners"][0]["port"] == 80
    # Envoy Gateway's proxy container listens on the listener port + 10000 (listener.go).
    assert service["spec"]["ports"] == [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 10080}]


def test_internet_is_internet_facing_with_tls_at_the_nlb_on_443():
    service = nlb_of("internet")
    a = service["metadata"]["annotations"]
    assert a["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internet-facing"
    assert a["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"] == CERT
    assert a["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "443"
    assert service["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert objects_of("internet")["gateway"]["spec"]["listeners"][0]["port"] == 443
    assert service["metadata"]["name"] == "ray-llm-nlb-internet"
    assert service["spec"]["ports"] == [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 10443}]


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_envoy_gateways_own_proxy_service_is_a_cluster_ip_in_every_scope(scope):
    # The NLB is raypd's Service (nlb_service), never Envoy Gateway's: see endpoint_lb's docstring.
    service = objects_of(scope)["envoy-proxy"]["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service == {"name": "ray-llm-gateway", "type": "ClusterIP"}


def test_cluster_scope_has_no_load_balancer():
    assert nlb_of("cluster") is None and nlb_of("cluster-open") is None


@pytest.mark.parametrize("scope", ["vpc", "vpc-tls", "internet"])
def test_the_nlb_service_selects_the_gateways_proxies_and_is_not_taken_for_envoy_gateways_own(scope):
    service = nlb_of(scope)
    assert service["metadata"]["namespace"] == endpoint_names.GATEWAY_NAMESPACE  # the proxy pods' namespace
    assert service["spec"]["selector"] == {
        **endpoint_names.PROXY_APP_LABELS,
        endpoint_names.OWNING_GATEWAY_NAME_LABEL: "ray-llm-gateway",
        endpoint_names.OWNING_GATEWAY_NAMESPACE_LABEL: "inference",
    }
    # Envoy Gateway deletes every other Service that carries its proxies' labels (infra_resource.go
    # DeleteAllExcept): the NLB's Service must carry none of them.
    assert not set(service["metadata"]["labels"]) & set(service["spec"]["selector"])


def test_api_keys_come_from_the_shared_secret_in_the_authorization_header():
    policy = objects_of("vpc")["security-policy"]
    auth = policy["spec"]["apiKeyAuth"]
    assert auth["credentialRefs"] == [{"group": "", "kind": "Secret", "name": "ray-llm-api-keys"}]
    assert auth["extractFrom"] == [{"headers": [endpoint_names.API_KEY_HEADER]}]
    assert auth["sanitize"] is True
    assert policy["spec"]["targetRefs"][0]["name"] == objects_of("vpc")["route"]["metadata"]["name"]
    assert "security-policy" not in objects_of("cluster-open")


def test_the_gateway_uses_the_shared_names_and_waits_for_an_address():
    objects = objects_of("vpc")
    assert objects["gateway-class"]["metadata"]["name"] == endpoint_names.GATEWAY_CLASS_NAME
    ref = objects["gateway-class"]["spec"]["parametersRef"]
    assert (ref["kind"], ref["namespace"]) == ("EnvoyProxy", endpoint_names.GATEWAY_NAMESPACE)
    gateway = objects["gateway"]
    assert gateway["metadata"]["name"] == endpoint_names.gateway_name("ray-llm")
    assert gateway["metadata"]["namespace"] == "inference"
    assert gateway["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Programmed"
    assert objects["envoy-proxy"]["spec"]["provider"]["kubernetes"]["envoyDeployment"]["pod"][
        "nodeSelector"] == defaults.SYSTEM_LABELS


@pytest.mark.parametrize("scope, host, url", [
    ("vpc", "k8s-nlb.elb.us-east-2.amazonaws.com", "http://k8s-nlb.elb.us-east-2.amazonaws.com/v1"),
    ("vpc-tls", "k8s-nlb.elb.us-east-2.amazonaws.com", "https://llm.internal.example.com/v1"),
    ("internet", "k8s-nlb.elb.us-east-2.amazonaws.com", "https://k8s-nlb.elb.us-east-2.amazonaws.com/v1"),
    ("cluster", None, "http://ray-llm-gateway.envoy-gateway-system.svc.cluster.local/v1"),
])
def test_the_endpoint_output_is_where_a_program_connects(scope, host, url):
    output = endpoint_output(spec_of(scope), host)
    assert output["url"] == url
    assert output["scope"] == spec_of(scope).endpoint.scope


def test_lb_controller_values_use_only_the_charts_keys_and_irsa():
    values = lb_controller_values("raypd-dev", "us-east-2", "vpc-1", "arn:aws:iam::123456789012:role/lbc")
    chart = yaml.safe_load((FIXTURES / "charts" / "aws-load-balancer-controller-3.5.0-values.yaml").read_text())
    assert set(values) <= set(chart), set(values) - set(chart)
    assert set(values["serviceAccount"]) <= set(chart["serviceAccount"])
    assert values["serviceAccount"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/lbc"}
    assert values["nodeSelector"] == defaults.SYSTEM_LABELS


def test_envoy_gateway_values_use_only_the_charts_keys():
    values = envoy_gateway_values()
    text = (FIXTURES / "charts" / "gateway-helm-v1.9.0-values.tmpl.yaml").read_text()
    chart = yaml.safe_load(text.replace("${", "x-{"))  # the template's image placeholders
    assert set(values) <= set(chart)
    assert set(values["deployment"]["pod"]) <= set(chart["deployment"]["pod"])


def test_the_iam_policy_is_the_controllers_published_one():
    policy = lb_controller_iam_policy()
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                        else s["Action"])}
    assert policy["Version"] == "2012-10-17"
    assert {"elasticloadbalancing:CreateLoadBalancer", "ec2:AuthorizeSecurityGroupIngress",
            "elasticloadbalancing:ModifyListenerAttributes"} <= actions
