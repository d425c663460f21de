"""GCS fault tolerance (issue 31 §1): the `raypd:faultTolerance` block, the RayService's
`gcsFaultToleranceOptions` as KubeRay 1.4's CRD takes them, the replication group's shape, its
price and the `faultTolerance` output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.changes.assess import assess
from components.config import catalogue, defaults
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.gcs_fault_tolerance import (
    ELASTICACHE_HOST_PLACEHOLDER,
    replication_group_settings,
    with_redis_host,
)
from components.render.outputs import render_stack_outputs, validate_outputs
from components.render.rayservice import render_rayservice
from tests.strict_schema import strict

CRD = Path(__file__).resolve().parents[1] / "fixtures" / "crds" / "ray.io_rayservices-v1.4.0.yaml"
EXTERNAL = {"raypd:faultTolerance": {"gcs": "external", "redisAddress": "rediss://redis.example.internal:6380",
                                     "redisPasswordSecret": "gcs-redis/password"}}


def spec_of(config: dict[str, Any]) -> DeploymentSpec:
    return DeploymentSpec.from_config(config, "dev")


def errors_of(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev")
    return {error.field: error.message for error in caught.value.errors}


def cluster_config(config: dict[str, Any]) -> dict[str, Any]:
    return render_rayservice(plan_deployment(spec_of(config)), "us-east-2a")["spec"]["rayClusterConfig"]


# ---- the block ----

def test_disaggregated_stacks_get_elasticache_and_colocated_ones_nothing_by_default():
    assert spec_of({}).gcs_store == "elasticache"
    assert spec_of({"raypd:mode": "colocated"}).gcs_store == "off"
    chosen = {"raypd:mode": "colocated", "raypd:faultTolerance": {"gcs": "elasticache"}}
    assert spec_of(chosen).gcs_store == "elasticache"
    assert spec_of({"raypd:faultTolerance": {"gcs": "off"}}).gcs_store == "off"


def test_the_default_block_is_no_key_and_a_chosen_one_round_trips():
    assert "raypd:faultTolerance" not in spec_of({}).public_config()
    public = spec_of(EXTERNAL).public_config()
    assert public["raypd:faultTolerance"] == {**EXTERNAL["raypd:faultTolerance"], "cacheNodeType": "cache.t4g.small"}
    assert spec_of(public).fault_tolerance == spec_of(EXTERNAL).fault_tolerance


def test_turning_it_off_on_a_disaggregated_stack_is_allowed_with_a_warning():
    warnings = spec_of({"raypd:faultTolerance": {"gcs": "off"}}).warnings
    assert any("raypd:faultTolerance.gcs is off" in w and "every worker" in w for w in warnings)
    assert not any("faultTolerance" in w for w in spec_of({}).warnings)


@pytest.mark.parametrize("block, field, words", [
    ({"gcs": "external"}, "raypd:faultTolerance.redisAddress", "required with gcs: external"),
    ({"redisAddress": "rediss://r.example:6379"}, "raypd:faultTolerance.redisAddress",
     "gcs: external only, and this stack's gcs is elasticache"),
    ({"gcs": "off", "redisPasswordSecret": "s/p"}, "raypd:faultTolerance.redisPasswordSecret",
     "gcs: external only"),
    ({"gcs": "off", "cacheNodeType": "cache.t4g.medium"}, "raypd:faultTolerance.cacheNodeType",
     "gcs: elasticache only"),
    ({"gcs": "redis"}, "raypd:faultTolerance.gcs", "'elasticache', 'external' or 'off'"),
    ({"cacheNodeType": "t4g.small"}, "raypd:faultTolerance.cacheNodeType", "not an ElastiCache node type"),
    ({"gcs": "external", "redisAddress": "redis.example:6379"}, "raypd:faultTolerance.redisAddress",
     "not a Redis address"),
    ({"gcs": "external", "redisAddress": "rediss://r.example"}, "raypd:faultTolerance.redisAddress",
     "not a Redis address"),
    ({"gcs": "external", "redisAddress": "rediss://r.example:70000"}, "raypd:faultTolerance.redisAddress",
     "not a Redis address"),
    ({"gcs": "external", "redisAddress": "rediss://r.example:6379", "redisPasswordSecret": "Bad_Name"},
     "raypd:faultTolerance.redisPasswordSecret", "<Secret name>/<key>"),
    ({"tls": True}, "raypd:faultTolerance.tls", "unknown key"),
])
def test_each_problem_names_its_key(block, field, words):
    errors = errors_of({"raypd:faultTolerance": block})
    assert field in errors and words in errors[field], errors


def test_a_password_in_the_address_is_refused_without_being_shown():
    errors = errors_of({"raypd:faultTolerance": {"gcs": "external",
                                                 "redisAddress": "rediss://default:hunter2hunter2@r.example:6379"}})
    message = errors["raypd:faultTolerance.redisAddress"]
    assert "redisPasswordSecret" in message and "hunter2" not in message


@pytest.mark.parametrize("hostile", [
    "rediss://r.example:6379\n", "rediss://r.example:6379 --redis-password=x", "rediss://R.EXAMPLE:6379",
    "rediss://r.example:6379/0", "rediss://r.exаmple:6379",  # a Cyrillic а
    "rediss://" + "a" * 5000 + ":6379", "rediss://r.example:6379,rediss://s.example:6379", "$(reboot)",
])
def test_hostile_addresses_are_refused_and_never_quoted_whole(hostile):
    errors = errors_of({"raypd:faultTolerance": {"gcs": "external", "redisAddress": hostile}})
    message = errors["raypd:faultTolerance.redisAddress"]
    assert len(message) < 400 and "a" * 200 not in message


def test_external_redis_without_tls_or_password_warns():
    warnings = spec_of({"raypd:faultTolerance": {"gcs": "external",
                                                 "redisAddress": "redis://10.0.3.7:6379"}}).warnings
    assert any("without TLS" in w for w in warnings)
    assert any("redisPasswordSecret is not set" in w for w in warnings)
    assert not any("faultTolerance" in w for w in spec_of(EXTERNAL).warnings)


# ---- the RayService ----

def test_elasticache_options_use_tls_and_the_token_secret_never_the_token():
    options = cluster_config({})["gcsFaultToleranceOptions"]
    assert options == {
        "redisAddress": f"rediss://{ELASTICACHE_HOST_PLACEHOLDER}:6379",
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "ray-llm-gcs-redis", "key": "password"}}},
    }


def test_external_options_carry_the_users_address_and_secret():
    options = cluster_config(EXTERNAL)["gcsFaultToleranceOptions"]
    assert options == {
        "redisAddress": "rediss://redis.example.internal:6380",
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "gcs-redis", "key": "password"}}},
    }
    passwordless = {"raypd:faultTolerance": {"gcs": "external", "redisAddress": "rediss://r.example:6379"}}
    assert cluster_config(passwordless)["gcsFaultToleranceOptions"] == {"redisAddress": "rediss://r.example:6379"}


@pytest.mark.parametrize("config", [{"raypd:faultTolerance": {"gcs": "off"}}, {"raypd:mode": "colocated"}])
def test_gcs_off_renders_no_options(config):
    assert "gcsFaultToleranceOptions" not in cluster_config(config)


@pytest.mark.parametrize("config", [{}, EXTERNAL])
def test_nothing_kuberay_refuses_beside_the_options(config):
    # KubeRay 1.4 utils/validation.go: with gcsFaultToleranceOptions the head must not set
    # RAY_REDIS_ADDRESS, REDIS_PASSWORD, redis-password nor the storage-namespace annotation; and
    # the namespace is KubeRay's per-cluster default (a shared one would mix two clusters' GCS
    # during a NewCluster switch, and the old cluster's clean-up Job would delete it).
    manifest = render_rayservice(plan_deployment(spec_of(config)), "us-east-2a")
    cluster = manifest["spec"]["rayClusterConfig"]
    head = cluster["headGroupSpec"]
    env = {e["name"] for e in head["template"]["spec"]["containers"][0]["env"]}
    assert not env & {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD", "REDIS_USERNAME", "RAY_external_storage_namespace"}
    assert "redis-password" not in head["rayStartParams"]
    assert "externalStorageNamespace" not in cluster["gcsFaultToleranceOptions"]
    annotations = {**manifest["metadata"]["annotations"], **head["template"].get("metadata", {}).get("annotations", {})}
    assert "ray.io/external-storage-namespace" not in annotations and "ray.io/ft-enabled" not in annotations


@pytest.fixture(scope="module")
def crd_schema() -> dict[str, Any]:
    crd = yaml.load(CRD.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1" and v["served"]]
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta is not in the CRD
    return schema


@pytest.mark.parametrize("config", [
    {}, EXTERNAL, {"raypd:mode": "colocated"}, {"raypd:upgradeStrategy": "newCluster"},
    {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
     "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2}},
])
def test_the_whole_rayservice_fits_kuberay_1_4s_crd(crd_schema, config):
    manifest = render_rayservice(plan_deployment(spec_of(config)), "us-east-2a")
    manifest["spec"] = with_redis_host(manifest["spec"], "master.gcs-redis.abc123.use2.cache.amazonaws.com")
    problems = [f"{'.'.join(map(str, e.path))}: {e.message}"
                for e in jsonschema.Draft7Validator(crd_schema).iter_errors(manifest)]
    assert problems == []


def test_the_stack_fills_in_the_primary_endpoint_without_touching_the_rest():
    manifest = render_rayservice(plan_deployment(spec_of({})), "us-east-2a")
    filled = with_redis_host(manifest["spec"], "master.gcs-redis.abc123.use2.cache.amazonaws.com")
    assert filled["rayClusterConfig"]["gcsFaultToleranceOptions"]["redisAddress"] == (
        "rediss://master.gcs-redis.abc123.use2.cache.amazonaws.com:6379")
    rendered = manifest["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]
    assert ELASTICACHE_HOST_PLACEHOLDER in rendered["redisAddress"]  # the renderer's copy untouched
    filled["rayClusterConfig"].pop("gcsFaultToleranceOptions")
    manifest["spec"]["rayClusterConfig"].pop("gcsFaultToleranceOptions")
    assert filled == manifest["spec"]
    off = render_rayservice(plan_deployment(spec_of({"raypd:faultTolerance": {"gcs": "off"}})))
    assert with_redis_host(off["spec"], "x") == off["spec"]


def test_turning_it_on_or_off_is_a_new_ray_cluster_but_the_node_type_is_not():
    digest = "raypd.io/ray-cluster-digest"

    def annotation(config):
        return render_rayservice(plan_deployment(spec_of(config)))["metadata"]["annotations"][digest]
    assert annotation({}) != annotation({"raypd:faultTolerance": {"gcs": "off"}})
    assert annotation({}) == annotation({"raypd:faultTolerance": {"cacheNodeType": "cache.t4g.medium"}})


# ---- the managed Redis: its shape and price ----

def test_the_replication_group_requires_tls_and_fails_over():
    settings = replication_group_settings(spec_of({}))
    assert settings["transit_encryption_enabled"] is True and settings["transit_encryption_mode"] == "required"
    assert settings["at_rest_encryption_enabled"] is True
    assert (settings["engine"], settings["node_type"], settings["port"]) == ("valkey", "cache.t4g.small", 6379)
    assert settings["num_cache_clusters"] == 2 and settings["automatic_failover_enabled"] is True
    assert settings["multi_az_enabled"] is True
    assert "auth_token" not in settings  # the stack adds it, from pulumi_random, as a secret


def test_the_estimate_adds_two_elasticache_nodes_and_says_nothing_for_an_unknown_type():
    on, off = plan_deployment(spec_of({})), plan_deployment(spec_of({"raypd:faultTolerance": {"gcs": "off"}}))
    node = catalogue.CACHE_NODE_USD_PER_HOUR[defaults.GCS_CACHE_NODE_TYPE]
    assert node == pytest.approx(0.0256)
    assert on.cost.usd_per_hour == pytest.approx(off.cost.usd_per_hour + 2 * node)
    assert plan_deployment(spec_of(EXTERNAL)).cost == off.cost  # a Redis raypd does not run is not priced
    odd = plan_deployment(spec_of({"raypd:faultTolerance": {"cacheNodeType": "cache.r7g.large"}}))
    assert "cache.r7g.large" in odd.cost.unpriced


@pytest.mark.parametrize("config, store", [({}, "elasticache"), (EXTERNAL, "external"),
                                           ({"raypd:mode": "colocated"}, "off")])
def test_the_output_says_where_the_gcs_lives_and_nothing_else(config, store):
    spec = spec_of(config)
    document = render_stack_outputs(spec, availability_zone="us-east-2a", cluster_name="c")
    assert document["faultTolerance"] == {"gcs": store}
    document["kubeconfig"] = "{}"
    validate_outputs(document)
    with pytest.raises(ValueError):
        validate_outputs({**document, "faultTolerance": {"gcs": "redis"}})


# ---- the change preview ----

def assessed(before: dict[str, Any], after: dict[str, Any], outputs: Any = None):
    return assess(plan_deployment(spec_of(before)), plan_deployment(spec_of(after)), "us-east-2a", outputs)


def test_turning_it_off_rebuilds_the_ray_cluster_and_removes_redis():
    result = assessed({}, {"raypd:faultTolerance": {"gcs": "off"}})
    effects = {effect.subject: effect for effect in result.effects}
    assert effects["the Ray cluster"].kind.words == "new Ray cluster"
    assert "GCS fault tolerance elasticache -> off" in effects["the Ray cluster"].detail
    assert "deleted after the Ray cluster moves off them" in effects["raypd:faultTolerance.gcs"].detail
    assert result.disruptive  # both strategies offered, priced
    back_on = {e.subject: e for e in assessed({"raypd:faultTolerance": {"gcs": "off"}}, {}).effects}
    assert "created first" in back_on["raypd:faultTolerance.gcs"].detail


def test_a_new_node_type_is_resized_in_place_without_touching_serving():
    result = assessed({}, {"raypd:faultTolerance": {"cacheNodeType": "cache.t4g.medium"}})
    assert [(e.subject, e.kind.words) for e in result.effects] == [
        ("raypd:faultTolerance.cacheNodeType", "no effect on serving")]
    assert not result.disruptive and result.chosen.downtime_seconds == 0


def test_the_first_up_of_an_older_stack_says_its_ray_cluster_is_rebuilt():
    older = {"schemaVersion": 1, "imageProvenance": {}, "observability": {}, "systemZone": "us-east-2a"}
    subject = "the Ray cluster (GCS fault tolerance)"
    assert subject in {e.subject for e in assessed({}, {}, older).effects}
    assert assessed({}, {}, older).disruptive
    deployed = {**older, "faultTolerance": {"gcs": "elasticache"}}
    assert subject not in {e.subject for e in assessed({}, {}, deployed).effects}
    off = {"raypd:faultTolerance": {"gcs": "off"}}
    assert subject not in {e.subject for e in assessed(off, off, older).effects}
