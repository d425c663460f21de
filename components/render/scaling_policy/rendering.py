"""What a stack's plan renders of raypd's PD scaling policy: whether it runs under it, the
application's keys that name it, the ConfigMap, and the mounts in the Ray pods.

One decision (`uses_pd_policy`) and the pieces that follow from it, so that the Serve config, the
RayService's pods and the program's ConfigMap never disagree about whether the policy is there.
"""

from __future__ import annotations

from typing import Any

from components.plan.topology import DeploymentPlan
from components.render.scaling_policy.delivery import (
    application_autoscaling_policy,
    policy_config_map,
    policy_runtime_env,
    policy_volume,
    policy_volume_mount,
)


def uses_pd_policy(plan: DeploymentPlan) -> bool:
    """A disaggregated app with an autoscaled phase scales under raypd's PD policy: under Serve's
    default, decode would also grow on requests that wait for prefill. A colocated app has one
    engine deployment: Serve's default is right."""
    return plan.spec.mode == "disaggregated" and plan.autoscaling


def application_scaling(plan: DeploymentPlan) -> dict[str, Any]:
    """The application's keys that carry the PD policy (`autoscaling_policy`, `runtime_env`), or
    none. Both are in Serve's code version (delivery's docstring): rendered only with the policy."""
    if not uses_pd_policy(plan):
        return {}
    return {"autoscaling_policy": application_autoscaling_policy(), "runtime_env": policy_runtime_env()}


def mounted_config_maps(plan: DeploymentPlan, labels: dict[str, str]) -> list[dict[str, Any]]:
    """The ConfigMaps the Ray pods mount (create them before the RayService)."""
    if not uses_pd_policy(plan):
        return []
    return [policy_config_map(plan.spec.service_name, plan.spec.namespace, labels)]


def mount_policy_file(plan: DeploymentPlan, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """Mount the policy file in a Ray container (head and every worker group: Serve's build task
    that imports it may run on any Ray node)."""
    if uses_pd_policy(plan):
        container.setdefault("volumeMounts", []).append(policy_volume_mount())
        pod_spec.setdefault("volumes", []).append(policy_volume(plan.spec.service_name))
