"""GCS fault tolerance under the mock runtime (issue 31 §1): the ElastiCache resources the program
creates, their key inputs, the token kept secret everywhere, the RayService's options and its
dependencies, and what else the reference plan does NOT change."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.render.gcs_fault_tolerance import ELASTICACHE_HOST_PLACEHOLDER

OFF = {"raypd:faultTolerance": {"gcs": "off"}}
EXTERNAL = {"raypd:faultTolerance": {"gcs": "external", "redisAddress": "rediss://redis.example.internal:6379",
                                     "redisPasswordSecret": "my-redis/token"}}
# What gcs elasticache adds to a stack (by resource name), beside the RayService's options.
NEW_RESOURCES = {"gcs", "gcs-sg", "gcs-from-nodes", "gcs-subnets", "gcs-auth-token", "gcs-redis",
                 "pd-service-gcs-redis"}
RAYSERVICE = "pd-service-rayservice"


def by_name(plan) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in plan.resources}


def options(plan) -> Any:
    return plan.named(RAYSERVICE)["inputs"]["spec"]["rayClusterConfig"].get("gcsFaultToleranceOptions")


def test_the_reference_gets_a_tls_replication_group_in_the_private_subnets(reference_plan):
    group = reference_plan.named("gcs-redis")["inputs"]
    assert group["transitEncryptionEnabled"] is True and group["transitEncryptionMode"] == "required"
    assert group["atRestEncryptionEnabled"] is True
    assert (group["engine"], group["nodeType"], group["numCacheClusters"]) == ("valkey", "cache.t4g.small", 2)
    assert group["automaticFailoverEnabled"] is True and group["multiAzEnabled"] is True
    assert group["authToken"] == "[secret]"
    (sg,) = group["securityGroupIds"]  # its own group only (gcs-sg)
    assert sg.startswith("sg-") and {"gcs-sg", "gcs-subnets", "gcs-auth-token"} <= set(
        reference_plan.named("gcs-redis")["dependsOn"])
    private = [reference_plan.named(f"network-private-us-east-2{z}") for z in "ab"]
    subnets = reference_plan.named("gcs-subnets")
    assert set(subnets["dependsOn"]) == {p["name"] for p in private}
    assert len(subnets["inputs"]["subnetIds"]) == 2


def test_redis_admits_the_cluster_nodes_on_6379_and_nothing_else(reference_plan):
    rules = [r for r in reference_plan.resources if r["type"].startswith("aws:vpc/securityGroup")
             and r["name"].startswith("gcs")]
    assert [r["name"] for r in rules] == ["gcs-from-nodes"]
    (rule,) = rules
    inputs = rule["inputs"]
    assert (inputs["ipProtocol"], inputs["fromPort"], inputs["toPort"]) == ("tcp", 6379, 6379)
    # From the EKS cluster security group (the nodes'), never an address range.
    assert inputs["referencedSecurityGroupId"].startswith("sg-") and "cluster-eks" in rule["dependsOn"]
    assert not {"cidrIpv4", "cidrIpv6", "prefixListId"} & set(inputs)
    group = reference_plan.named("gcs-sg")["inputs"]
    assert not group.get("ingress") and "0.0.0.0/0" not in json.dumps(group)


def test_the_token_is_a_secret_wherever_it_goes_and_never_an_output(reference_plan):
    assert reference_plan.named("gcs-auth-token")["inputs"]["special"] is False
    secret = reference_plan.named("pd-service-gcs-redis")
    assert secret["inputs"]["metadata"] == {"name": "ray-llm-gcs-redis", "namespace": "inference"}
    assert secret["inputs"]["stringData"] == "[secret]"
    assert sorted(k for k, v in reference_plan.outputs.items() if v == "[secret]") == ["apiKey", "kubeconfig"]
    assert reference_plan.outputs["faultTolerance"] == {"gcs": "elasticache"}
    text = json.dumps(reference_plan.document).lower()
    assert "authtoken\": \"[secret]" in text and "password\": \"" not in text


def test_the_rayservice_points_at_the_primary_endpoint_and_waits_for_redis(reference_plan):
    ray_service = reference_plan.named(RAYSERVICE)
    address = options(reference_plan)["redisAddress"]
    assert address.startswith("rediss://master.gcs-redis.") and address.endswith(".cache.amazonaws.com:6379")
    assert ELASTICACHE_HOST_PLACEHOLDER not in json.dumps(reference_plan.document)
    assert options(reference_plan)["redisPassword"] == {
        "valueFrom": {"secretKeyRef": {"key": "password", "name": "ray-llm-gcs-redis"}}}
    # Created after Redis and its Secret, so destroyed before them: KubeRay's clean-up Job,
    # run when the RayCluster goes, still finds both.
    assert {"gcs-redis", "pd-service-gcs-redis"} <= set(ray_service["dependsOn"])


def test_the_reference_plan_changes_only_by_the_new_resources(make_plan, reference_config, reference_plan):
    off = make_plan({**reference_config, **OFF})
    on_resources, off_resources = by_name(reference_plan), by_name(off)
    assert set(on_resources) - set(off_resources) == NEW_RESOURCES
    assert set(off_resources) <= set(on_resources)
    for name, resource in off_resources.items():
        if name == RAYSERVICE:
            continue
        assert on_resources[name]["inputs"] == resource["inputs"], name
    on_spec = json.loads(json.dumps(on_resources[RAYSERVICE]["inputs"]["spec"]))
    assert on_spec["rayClusterConfig"].pop("gcsFaultToleranceOptions")
    assert on_spec == off_resources[RAYSERVICE]["inputs"]["spec"]
    changed = {k for k in reference_plan.outputs if reference_plan.outputs[k] != off.outputs.get(k)}
    assert changed == {"faultTolerance", "estimatedUsdPerHour"}


@pytest.mark.parametrize("config", [OFF, {"raypd:mode": "colocated"}])
def test_gcs_off_creates_no_redis(make_plan, config):
    plan = make_plan(config)
    assert not NEW_RESOURCES & set(by_name(plan))
    assert not [r for r in plan.resources if "elasticache" in r["type"]]
    assert options(plan) is None
    assert plan.outputs["faultTolerance"] == {"gcs": "off"}


def test_an_external_redis_creates_nothing_and_reads_the_users_secret(make_plan):
    plan = make_plan(EXTERNAL)
    assert not NEW_RESOURCES & set(by_name(plan))
    assert options(plan) == {"redisAddress": "rediss://redis.example.internal:6379",
                             "redisPassword": {"valueFrom": {"secretKeyRef": {"key": "token", "name": "my-redis"}}}}
    assert plan.outputs["faultTolerance"] == {"gcs": "external"}
