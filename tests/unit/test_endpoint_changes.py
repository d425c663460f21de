"""The change preview of raypd:endpoint (components.changes.endpoint through changes.assess)."""

from __future__ import annotations

from typing import Any

import pytest

from components.changes.assess import Kind, assess
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment

CERT = "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"
INTERNET = {"scope": "internet", "certificateArn": CERT}


def effects(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[Kind, str]]:
    def plan(endpoint: dict[str, Any]):
        config = {"raypd:endpoint": endpoint} if endpoint else {}
        return plan_deployment(DeploymentSpec.from_config(config, "dev"))

    result = assess(plan(before), plan(after), "us-east-2a")
    return {e.subject: (e.kind, e.detail) for e in result.effects}


# What these sentences claim of the stack (the new NLB made first and named by endpoint.url, the
# old one deleted while the controller still runs) is proven on the program under the mock
# runtime: tests/pulumi/test_endpoint_scope_changes.py.

@pytest.mark.parametrize("before, after, scheme", [({}, INTERNET, "internet-facing"), (INTERNET, {}, "internal")])
def test_a_scheme_change_makes_a_new_load_balancer_first_and_the_url_names_it(before, after, scheme):
    kind, detail = effects(before, after)["raypd:endpoint.scope"]
    assert kind == Kind.NEW_LOAD_BALANCER
    assert f"a new {scheme} NLB (other subnets) is created first" in detail
    assert "endpoint.url becomes its name; then the old NLB is deleted" in detail


def test_leaving_for_cluster_deletes_the_nlb_before_the_controller_and_cuts_off_outside_clients():
    kind, detail = effects({}, {"scope": "cluster"})["raypd:endpoint.scope"]
    assert kind == Kind.NEW_LOAD_BALANCER and "loses the endpoint" in detail
    assert ("`up` waits until the AWS Load Balancer Controller has deleted the NLB, its target groups "
            "and security groups; only then is the controller removed") in detail


def test_a_new_load_balancer_from_cluster_is_in_place_and_the_url_names_it():
    kind, detail = effects({"scope": "cluster"}, {})["raypd:endpoint.scope"]
    assert kind == Kind.IN_PLACE
    assert "an internal NLB for it (a few minutes; `up` waits for its name)" in detail
    assert "endpoint.url becomes that name" in detail


def test_ranges_and_certificates_change_in_place():
    assert effects({}, {"allowedCidrs": ["10.0.0.0/8"]})["raypd:endpoint.allowedCidrs"][0] == Kind.IN_PLACE
    other = CERT.replace("0f3c7d2e", "1f3c7d2e")
    kind, detail = effects(INTERNET, {**INTERNET, "certificateArn": other})["raypd:endpoint.certificateArn"]
    assert kind == Kind.IN_PLACE and "in place" in detail
    kind, detail = effects({}, {"certificateArn": CERT})["raypd:endpoint.certificateArn"]
    assert kind == Kind.IN_PLACE and "https://" in detail


def test_dropping_keys_says_every_key_is_gone():
    kind, detail = effects({}, {"auth": "none"})["raypd:endpoint.auth"]
    assert kind == Kind.IN_PLACE and "every key is gone" in detail


def test_no_endpoint_change_no_endpoint_effect():
    assert not [s for s in effects({}, {}) if s.startswith("raypd:endpoint")]


def test_an_address_change_does_not_hide_the_zero_downtime_choice():
    before = plan_deployment(DeploymentSpec.from_config({}, "dev"))
    after = plan_deployment(DeploymentSpec.from_config(
        {"raypd:endpoint": INTERNET, "raypd:model": {"maxModelLen": 8192}}, "dev"))
    result = assess(before, after, "us-east-2a")
    assert {c.name for c in result.choices} == {"inPlace", "newCluster"}
