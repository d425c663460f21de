"""An autoscaled stack under the mock runtime (issue 30): what the program registers and exports."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.render.outputs import validate_outputs
from components.stack.mockrun import run_program
from components.stack.program import build
from tests.pulumi.conftest import Plan

AUTOSCALED: dict[str, Any] = {
    "raypd:prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2, "targetOngoingRequests": 4,
                                      "downscaleDelaySeconds": 1200}},
    "raypd:decode": {"replicas": 2, "autoscaling": {"minReplicas": 1, "maxReplicas": 4,
                                                    "targetOngoingRequests": 16}},
}


@pytest.fixture(scope="module")
def autoscaled_plan(make_plan) -> Plan:
    return make_plan(AUTOSCALED)


def deployments(plan: Plan) -> dict[str, dict[str, Any]]:
    (rayservice,) = plan.of_type("kubernetes:ray.io/v1:RayService")
    (app,) = yaml.safe_load(rayservice["inputs"]["spec"]["serveConfigV2"])["applications"]
    return {d["name"]: d for d in app["deployments"]}


def test_the_rayservice_carries_each_phases_autoscaling_override(autoscaled_plan: Plan) -> None:
    found = deployments(autoscaled_plan)
    assert found["Decode:qwen3_5-9b"] == {
        "name": "Decode:qwen3_5-9b",
        "autoscaling_config": {"min_replicas": 1, "max_replicas": 4, "initial_replicas": 2,
                               "target_ongoing_requests": 16.0, "upscale_delay_s": 30.0,
                               "downscale_delay_s": 600.0},
        "max_ongoing_requests": 256,
    }
    assert found["Prefill:qwen3_5-9b"]["autoscaling_config"]["downscale_delay_s"] == 1200.0
    assert not any("num_replicas" in d for d in found.values())


def test_the_reference_stack_keeps_its_fixed_counts(reference_plan: Plan) -> None:
    assert all(set(d) == {"name", "num_replicas"} for d in deployments(reference_plan).values())
    assert not any("minReplicas" in phase for phase in reference_plan.outputs["topology"].values())
    assert "estimatedUsdPerHourAtMaximum" not in reference_plan.outputs


def test_the_outputs_report_the_bounds_and_the_cost_range(autoscaled_plan: Plan) -> None:
    outputs = autoscaled_plan.outputs
    decode = outputs["topology"]["decode"]
    assert (decode["minReplicas"], decode["replicas"], decode["maxReplicas"]) == (1, 2, 4)
    assert (outputs["estimatedUsdPerHourAtMinimum"] < outputs["estimatedUsdPerHour"]
            < outputs["estimatedUsdPerHourAtMaximum"])
    validate_outputs({**outputs, "kubeconfig": "[secret]"})


def test_the_plan_warns_where_decode_would_flap(autoscaled_plan: Plan) -> None:
    warnings = autoscaled_plan.document["warnings"]
    assert any(w.startswith("raypd:decode.autoscaling.downscaleDelaySeconds 600 s (Serve's default)")
               for w in warnings)
    assert not any(w.startswith("raypd:prefill.autoscaling") for w in warnings)  # 1200 s is long enough


def test_the_worker_group_starts_at_the_starting_counts(autoscaled_plan: Plan) -> None:
    (rayservice,) = autoscaled_plan.of_type("kubernetes:ray.io/v1:RayService")
    (group,) = rayservice["inputs"]["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (3, 0, 128)


def test_pulumi_up_logs_the_plans_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pulumi up` shows the plan's warnings (components.plan.scaling) beside the spec's: build() logs them."""
    logged: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: logged.append(str(message)))
    spec = DeploymentSpec.from_config(AUTOSCALED, "dev")
    run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region)
    assert any(m.startswith("raypd:decode.autoscaling.downscaleDelaySeconds 600 s") for m in logged), logged


def test_the_pd_policy_file_is_mounted_in_every_ray_container_before_the_rayservice(autoscaled_plan: Plan) -> None:
    """Serve's build task may run on any Ray node and imports raypd's policy from the ConfigMap the
    program creates first (components.render.scaling_policy.delivery)."""
    (config_map,) = [c for c in autoscaled_plan.of_type("kubernetes:core/v1:ConfigMap")
                     if c["inputs"]["metadata"]["name"].endswith("-serve-policy")]
    assert config_map["inputs"]["metadata"]["name"] == "ray-llm-serve-policy"
    assert set(config_map["inputs"]["data"]) == {"raypd_pd_autoscaling.py"}
    (rayservice,) = autoscaled_plan.of_type("kubernetes:ray.io/v1:RayService")
    assert config_map["name"] in rayservice["dependsOn"]
    cluster = rayservice["inputs"]["spec"]["rayClusterConfig"]
    pods = [cluster["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in cluster["workerGroupSpecs"]]
    for pod in pods:
        (container,) = pod["containers"]
        assert {"name": "raypd-serve-policy", "mountPath": "/opt/raypd/python", "readOnly": True} in container[
            "volumeMounts"]
        assert {"name": "raypd-serve-policy", "configMap": {"name": "ray-llm-serve-policy"}} in pod["volumes"]
    (app,) = yaml.safe_load(rayservice["inputs"]["spec"]["serveConfigV2"])["applications"]
    assert app["autoscaling_policy"]["policy_function"] == "raypd_pd_autoscaling:pd_phase_policy"
    assert app["runtime_env"] == {"env_vars": {"PYTHONPATH": "/opt/raypd/python:${PYTHONPATH}"}}


def test_a_fixed_stack_mounts_no_policy(reference_plan: Plan) -> None:
    assert not [c for c in reference_plan.of_type("kubernetes:core/v1:ConfigMap")
                if c["inputs"]["metadata"]["name"].endswith("-serve-policy")]
