"""What an autoscaled phase renders (issue 30 §2): its Serve deployment override and the Ray cluster's
autoscaler settings, checked against what Ray 2.58 and KubeRay do with them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, plan_deployment
from components.render.ray_autoscaler import AUTOSCALER_IDLE_TIMEOUT_SECONDS, MAX_WORKERS_PER_GROUP
from components.render.rayservice import (
    RAY_CLUSTER_DIGEST_ANNOTATION,
    _ray_cluster_config,
    cluster_rebuild_digest,
    node_set,
    render_rayservice,
)
from components.render.scaling_policy.delivery import application_autoscaling_policy, policy_runtime_env
from components.render.serve_autoscaling import serve_code_version
from components.render.serve_config import render_application, render_serve_config

BLOCK: dict[str, Any] = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8}


def plan_of(config: dict[str, Any]) -> DeploymentPlan:
    return plan_deployment(DeploymentSpec.from_config(config, "dev"))


def overrides(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in render_application(plan_of(config))["deployments"]}


def test_an_autoscaled_phase_gets_serves_autoscaling_config_and_no_num_replicas() -> None:
    found = overrides({"raypd:decode": {"replicas": 2, "autoscaling": {**BLOCK, "upscaleDelaySeconds": 10}}})
    assert found["Decode:qwen3_5-9b"] == {
        "name": "Decode:qwen3_5-9b",
        # Field names: Ray 2.58 ray/serve/config.py AutoscalingConfig; every value explicit.
        "autoscaling_config": {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 2,
                               "target_ongoing_requests": 8.0, "upscale_delay_s": 10.0,
                               "downscale_delay_s": 600.0},
        "max_ongoing_requests": 256,  # vLLM's max_num_seqs on an L4, not Ray Serve LLM's 1e9
    }
    # The fixed phase is pinned at its count, but autoscaling: raypd's PD policy needs prefill's
    # context to take the requests waiting on prefill out of decode's signal.
    assert found["Prefill:qwen3_5-9b"] == {
        "name": "Prefill:qwen3_5-9b",
        "autoscaling_config": {"min_replicas": 1, "max_replicas": 1, "initial_replicas": 1,
                               "target_ongoing_requests": 256},
        "max_ongoing_requests": 256,
    }


def test_a_fixed_stack_and_a_colocated_one_keep_num_replicas_and_serves_default_policy() -> None:
    fixed = render_application(plan_of({"raypd:decode": {"replicas": 2}}))
    assert {d["name"]: d for d in fixed["deployments"]}["Decode:qwen3_5-9b"] == {
        "name": "Decode:qwen3_5-9b", "num_replicas": 2}
    colocated = render_application(plan_of({"raypd:mode": "colocated", "raypd:colocated": {"autoscaling": BLOCK}}))
    for application in (fixed, colocated):
        assert "autoscaling_policy" not in application and "runtime_env" not in application


def test_the_engine_limit_follows_the_phases_gpu() -> None:
    found = overrides({"raypd:decode": {"instanceType": "p5.4xlarge", "autoscaling": BLOCK}})
    assert found["Decode:qwen3_5-9b"]["max_ongoing_requests"] == 1024  # H100: vLLM's larger default


def test_autoscaling_never_changes_the_args_so_the_engines_are_built_the_same() -> None:
    fixed = render_application(plan_of({}))
    scaled = render_application(plan_of({"raypd:prefill": {"autoscaling": BLOCK},
                                         "raypd:decode": {"autoscaling": BLOCK}}))
    assert fixed["args"] == scaled["args"] and fixed["import_path"] == scaled["import_path"]
    # Each LLMConfig keeps num_replicas, so Ray Serve LLM adds no 1e9 autoscaling default of its own.
    assert scaled["args"]["decode_config"]["deployment_config"] == {"num_replicas": 1}


def test_the_code_version_counts_the_autoscaled_phases_and_the_pd_policy() -> None:
    # Ray 2.58 deploy_utils.get_app_code_version lists the policy of every override with an
    # autoscaling_config, and hashes the application's autoscaling_policy and runtime_env.
    fixed = serve_code_version(render_application(plan_of({})))
    assert fixed["deployment_autoscaling_policies"] == [] and fixed["autoscaling_policy"] is None
    one = serve_code_version(render_application(plan_of({"raypd:decode": {"autoscaling": BLOCK}})))
    assert one["deployment_autoscaling_policies"] == [None, None]  # decode, and prefill pinned
    assert one["autoscaling_policy"] == application_autoscaling_policy()
    assert one["runtime_env"] == policy_runtime_env()
    colocated = serve_code_version(render_application(plan_of(
        {"raypd:mode": "colocated", "raypd:colocated": {"autoscaling": BLOCK}})))
    assert colocated["deployment_autoscaling_policies"] == [None] and colocated["autoscaling_policy"] is None


def test_serves_own_override_merge_takes_them_when_ray_is_installed() -> None:
    """Ray Serve's own schema and `override_deployment_info` (ray/serve/_private/application_state.py)
    applied to deployments built as Ray Serve LLM builds them (num_replicas 1, max_ongoing_requests 1e9).
    Where ray is installed (run once with Ray 2.58's wheel: passes)."""
    pytest.importorskip("ray.serve.schema", reason="ray is not installed (it pulls several GB)")
    from ray import serve
    from ray.serve._private.application_state import override_deployment_info
    from ray.serve._private.deployment_info import DeploymentInfo
    from ray.serve.schema import ServeDeploySchema

    document = render_serve_config(plan_of({"raypd:decode": {"replicas": 2, "autoscaling": BLOCK}}))
    (app,) = ServeDeploySchema.model_validate(document).applications
    built = {}
    for name in ("Prefill:qwen3_5-9b", "Decode:qwen3_5-9b"):
        engine = serve.deployment(name=name, num_replicas=1, max_ongoing_requests=int(1e9))(type("Engine", (), {}))
        built[name] = DeploymentInfo(deployment_config=engine._deployment_config,
                                     replica_config=engine._replica_config, start_time_ms=0, deployer_job_id="t")
    merged = {name: info.deployment_config for name, info in override_deployment_info(built, app).items()}
    decode, prefill = merged["Decode:qwen3_5-9b"], merged["Prefill:qwen3_5-9b"]
    scaling = decode.autoscaling_config
    assert scaling is not None and decode.max_ongoing_requests == 256
    assert (scaling.min_replicas, scaling.initial_replicas, scaling.max_replicas) == (1, 2, 4)
    assert scaling.target_ongoing_requests == 8.0 and scaling.downscale_delay_s == 600.0
    pinned = prefill.autoscaling_config
    assert pinned is not None and (pinned.min_replicas, pinned.initial_replicas, pinned.max_replicas) == (1, 1, 1)


# ---- the Ray cluster ----

def worker_groups(config: dict[str, Any]) -> list[dict[str, Any]]:
    return render_rayservice(plan_of(config), "us-east-2a")["spec"]["rayClusterConfig"]["workerGroupSpecs"]


def test_every_worker_group_can_hold_its_phases_at_their_maximum() -> None:
    # Both phases at the spec's largest maximum on one shared group: the ceiling still covers them.
    most = {"replicas": 1, "autoscaling": {**BLOCK, "maxReplicas": 64}}
    plan = plan_of({"raypd:prefill": most, "raypd:decode": most})
    (rendered,) = worker_groups({"raypd:prefill": most, "raypd:decode": most})
    (group,) = plan.groups
    assert group.max_nodes == 128 <= rendered["maxReplicas"] == MAX_WORKERS_PER_GROUP
    # Where the cluster starts, and a floor that a later, lower minimum could never be held to.
    assert (rendered["replicas"], rendered["minReplicas"]) == (2, 0)
    for config in ({"raypd:prefill": {"instanceType": "g6e.8xlarge"}, "raypd:decode": most},
                   {"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "g6.12xlarge", **most}}):
        for rendered_group, planned in zip(worker_groups(config), plan_of(config).groups, strict=True):
            assert planned.max_nodes <= rendered_group["maxReplicas"]


def test_only_the_stacks_first_autoscaled_phase_changes_the_ray_cluster() -> None:
    """KubeRay builds a new RayCluster when the digest changes. The worker bounds and idle timeout
    are the same either way; what changes is the node autoscaler's do-not-evict annotation, on the
    workers of an autoscaled stack only (a fixed stack keeps its template): the stack's first
    autoscaled phase changes the digest, the bounds and which phases scale do not."""
    def digest(config: dict[str, Any]) -> str:
        manifest = render_rayservice(plan_of(config), "us-east-2a")
        return manifest["metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]

    assert digest({}) != digest({"raypd:decode": {"autoscaling": BLOCK}})
    assert digest({"raypd:decode": {"autoscaling": BLOCK}}) == digest(
        {"raypd:prefill": {"autoscaling": {**BLOCK, "maxReplicas": 9}}})
    cluster = render_rayservice(plan_of({"raypd:decode": {"autoscaling": BLOCK}}))["spec"]["rayClusterConfig"]
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["idleTimeoutSeconds"] == AUTOSCALER_IDLE_TIMEOUT_SECONDS == 900


def test_the_serve_config_in_the_rayservice_carries_the_overrides() -> None:
    manifest = render_rayservice(plan_of({"raypd:decode": {"autoscaling": BLOCK}}), "us-east-2a")
    (app,) = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
    decode = next(d for d in app["deployments"] if d["name"].startswith("Decode:"))
    assert "num_replicas" not in decode and decode["autoscaling_config"]["max_replicas"] == 4


def test_a_zero_downtime_stack_moves_to_new_nodes_when_autoscaling_is_turned_on() -> None:
    """Turning it on rebuilds the Serve application (its code version): a zero-downtime stack takes a
    new generation for it; other settings of the block change nothing of the generation."""
    def generation(config: dict[str, Any]) -> str:
        found = node_set(plan_of({"raypd:upgradeStrategy": "newCluster", **config}), "us-east-2a")
        assert found is not None
        return found

    fixed = generation({})
    assert generation({"raypd:decode": {"replicas": 2}}) == fixed
    scaled = generation({"raypd:decode": {"autoscaling": BLOCK}})
    assert scaled != fixed
    assert generation({"raypd:decode": {"replicas": 2, "autoscaling": {**BLOCK, "targetOngoingRequests": 2}}}) == scaled


def test_a_fixed_zero_downtime_stack_keeps_the_generation_it_had_before_issue_30() -> None:
    plan = plan_of({"raypd:upgradeStrategy": "newCluster", "raypd:decode": {"replicas": 3}})
    base = cluster_rebuild_digest(_ray_cluster_config(plan, "us-east-2a", None))
    args = json.dumps(render_application(plan)["args"], sort_keys=True)
    assert node_set(plan, "us-east-2a") == hashlib.sha256(f"{base}\n{args}".encode("utf-8")).hexdigest()[:10]
