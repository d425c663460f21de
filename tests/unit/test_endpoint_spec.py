"""raypd:endpoint (issue 17): defaults, every rule with a failing and a passing case, warnings."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec

CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"


def errors_of(endpoint: Any, **extra: Any) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({"raypd:endpoint": endpoint, **extra}, "dev")
    return {e.field: e.message for e in caught.value.errors}


def accepts(endpoint: Any, **extra: Any) -> DeploymentSpec:
    return DeploymentSpec.from_config({"raypd:endpoint": endpoint, **extra}, "dev")


def test_the_default_is_an_internal_load_balancer_with_api_keys_open_to_the_vpc_only():
    endpoint = DeploymentSpec.from_config({}, "dev").endpoint
    assert (endpoint.scope, endpoint.auth, endpoint.certificate_arn) == ("vpc", "apiKey", None)
    assert endpoint.effective_allowed_cidrs == ("10.0.0.0/16",)
    assert endpoint.load_balanced and not endpoint.tls


def test_the_vpc_default_range_is_the_range_the_network_builds():
    from components.stack.network import DEFAULT_VPC_CIDR

    assert DeploymentSpec.from_config({}, "dev").endpoint.effective_allowed_cidrs == (DEFAULT_VPC_CIDR,)


def test_internet_needs_a_certificate_naming_the_key():
    errors = errors_of({"scope": "internet"})
    assert set(errors) == {"raypd:endpoint.certificateArn"}
    assert "scope internet needs an ACM certificate" in errors["raypd:endpoint.certificateArn"]


def test_internet_refuses_auth_none_naming_the_key():
    errors = errors_of({"scope": "internet", "certificateArn": CERT, "auth": "none"})
    assert set(errors) == {"raypd:endpoint.auth"}


def test_internet_with_a_certificate_is_open_to_every_address_and_warns():
    spec = accepts({"scope": "internet", "certificateArn": CERT})
    assert spec.endpoint.effective_allowed_cidrs == ("0.0.0.0/0",)
    assert spec.endpoint.tls
    assert any(w.startswith("raypd:endpoint.allowedCidrs allows 0.0.0.0/0") for w in spec.warnings)


def test_internet_narrowed_to_listed_ranges_does_not_warn():
    spec = accepts({"scope": "internet", "certificateArn": CERT, "allowedCidrs": ["203.0.113.0/24"]})
    assert spec.endpoint.effective_allowed_cidrs == ("203.0.113.0/24",)
    assert not any("raypd:endpoint" in w for w in spec.warnings)


@pytest.mark.parametrize("scope", ["cluster", "vpc"])
def test_auth_none_is_allowed_inside_and_warns(scope):
    spec = accepts({"scope": scope, "auth": "none"})
    assert any(w.startswith("raypd:endpoint.auth is none") for w in spec.warnings)


def test_the_certificate_must_be_in_the_stacks_region():
    other = CERT.replace("us-east-2", "eu-west-1")
    errors = errors_of({"scope": "internet", "certificateArn": other})
    assert "is in eu-west-1, but the stack's load balancer is in us-east-2" in errors[
        "raypd:endpoint.certificateArn"]
    assert accepts({"scope": "internet", "certificateArn": other}, **{"aws:region": "eu-west-1"})


@pytest.mark.parametrize("arn", [
    "arn:aws:acm:us-east-2:123456789012:certificate/not-a-uuid",
    "arn:aws:iam::123456789012:server-certificate/x",
    "arn:aws:acm:us-east-2:12345:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6",
    CERT + "\u00e9",
    "x" * 5000,
])
def test_a_certificate_arn_of_another_shape_is_refused(arn):
    message = errors_of({"scope": "internet", "certificateArn": arn})["raypd:endpoint.certificateArn"]
    assert "is not an ACM certificate ARN" in message
    assert len(message) < 400  # a huge value is not quoted back whole


def test_other_partitions_take_their_own_arns():
    arn = "arn:aws-cn:acm:cn-north-1:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"
    spec = accepts({"scope": "vpc", "certificateArn": arn}, **{"aws:region": "cn-north-1"})
    assert spec.endpoint.tls


@pytest.mark.parametrize("cidrs, field, words", [
    (["10.0.0.1/16"], "raypd:endpoint.allowedCidrs[0]", "host bits set"),
    (["10.0.0.0/16", "10.0.0.0/16"], "raypd:endpoint.allowedCidrs[1]", "given twice"),
    (["2001:db8::/32"], "raypd:endpoint.allowedCidrs[0]", "IPv6"),
    ([], "raypd:endpoint.allowedCidrs", "is empty"),
    ("10.0.0.0/16", "raypd:endpoint.allowedCidrs", "must be a list"),
    ([f"10.{i}.0.0/16" for i in range(41)], "raypd:endpoint.allowedCidrs", "at most 40"),
])
def test_allowed_cidrs_are_checked_like_the_api_access_list(cidrs, field, words):
    assert words in errors_of({"scope": "vpc", "allowedCidrs": cidrs})[field]


@pytest.mark.parametrize("field, value", [
    ("certificateArn", CERT), ("allowedCidrs", ["10.0.0.0/16"]), ("host", "llm.example.com"),
])
def test_scope_cluster_refuses_load_balancer_settings(field, value):
    errors = errors_of({"scope": "cluster", field: value})
    assert "scope cluster has none" in errors[f"raypd:endpoint.{field}"]


def test_unknown_sub_keys_and_values_are_refused_by_name():
    assert errors_of({"scope": "vpc", "tls": True}) == {"raypd:endpoint.tls": "unknown key"}
    assert "raypd:endpoint.scope" in errors_of({"scope": "public"})
    assert "raypd:endpoint.auth" in errors_of({"auth": "basic"})


def test_control_characters_are_refused_before_anything_quotes_them():
    errors = errors_of({"scope": "vpc", "host": "llm\n.example.com"})
    assert "control character" in errors["raypd:endpoint.host"]


@pytest.mark.parametrize("host", ["LLM.example.com", "llm", "-a.example.com", "a" * 300 + ".com"])
def test_a_host_must_be_a_dns_name(host):
    assert "raypd:endpoint.host" in errors_of({"scope": "vpc", "host": host})


def test_pulumi_json_text_and_strict_json_both_read():
    text = '{"scope": "internet", "certificateArn": "%s", "allowedCidrs": ["203.0.113.0/24"]}' % CERT
    assert accepts(text).endpoint.scope == "internet"
    strict = DeploymentSpec.from_config({"raypd:endpoint": {
        "scope": "internet", "certificateArn": CERT, "allowedCidrs": ["203.0.113.0/24"]}}, "dev",
        strict=True)
    assert strict.endpoint.allowed_cidrs == ("203.0.113.0/24",)


def test_public_config_leaves_the_default_out_and_round_trips_the_rest():
    assert "raypd:endpoint" not in DeploymentSpec.from_config({}, "dev").public_config()
    spec = accepts({"scope": "internet", "certificateArn": CERT, "allowedCidrs": ["203.0.113.0/24"]})
    public = spec.public_config()
    assert public["raypd:endpoint"] == {"scope": "internet", "auth": "apiKey", "certificateArn": CERT,
                                        "allowedCidrs": ["203.0.113.0/24"]}
    assert DeploymentSpec.from_config(public, "dev") == spec
