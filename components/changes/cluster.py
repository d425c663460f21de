"""What a change of the EKS cluster itself does, for the change preview (components.changes.assess):
its identity (region and name), its Kubernetes version, and who may reach its API.

- A new region or cluster name is a new EKS cluster: everything on it is created again.
- EKS upgrades the control plane one minor version at a time and never downgrades; then every
  managed node group rolls (surge nodes of the same type, then drain).
- The public endpoint's access list (UpdateClusterConfig, resourcesVpcConfig.publicAccessCidrs)
  and the access entries change in place.
"""

from __future__ import annotations

from typing import Optional

from components.changes.effects import Effect, Kind, minutes
from components.config.spec import DeploymentSpec
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS


def cluster_replacement(before: DeploymentSpec, after: DeploymentSpec) -> Optional[Effect]:
    """A new EKS cluster (another region or cluster name), else None."""
    if (before.region, before.effective_cluster_name) == (after.region, after.effective_cluster_name):
        return None
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    gpu_group_time = TYPICAL_SECONDS["eks:index:ManagedNodeGroup[gpu]"]
    cluster_time = TYPICAL_SECONDS["eks:index:Cluster"]
    return Effect(
        "aws:region / raypd:clusterName", Kind.REPLACE_CLUSTER,
        f"a new EKS cluster and everything on it ({minutes(cluster_time + gpu_group_time + cold_cluster)}); "
        "the old one is deleted after: the endpoint is down meanwhile and its address changes",
        cluster_time + gpu_group_time + cold_cluster,
    )


def kubernetes_version_effect(before: DeploymentSpec, after: DeploymentSpec) -> Optional[Effect]:
    """An upgrade (every node group rolls: Kind.ROLL_NODES), a refused step, or None."""
    old_minor = int(before.kubernetes_version.split(".")[1])
    new_minor = int(after.kubernetes_version.split(".")[1])
    if new_minor < old_minor or new_minor > old_minor + 1:
        return Effect(
            "raypd:kubernetesVersion", Kind.REFUSED,
            f"{before.kubernetes_version} -> {after.kubernetes_version}: EKS upgrades one minor "
            "version at a time and never downgrades, so the update fails at its first step; "
            f"go to 1.{old_minor + 1} first" if new_minor > old_minor else
            f"{before.kubernetes_version} -> {after.kubernetes_version}: EKS never downgrades a "
            "cluster; the update fails at its first step",
        )
    if before.kubernetes_version == after.kubernetes_version:
        return None
    control = CHANGE_TIMES["control-plane-upgrade"].seconds
    roll = CHANGE_TIMES["node-group-roll"].seconds
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    return Effect(
        "raypd:kubernetesVersion", Kind.ROLL_NODES,
        f"EKS upgrades the control plane ({minutes(control)}), then every managed node group "
        f"rolls ({minutes(roll)} each): EKS starts surge nodes of the same type, then drains "
        "the old ones. That includes the system node holding the Ray head, the KubeRay "
        "operator and CoreDNS, so the whole Ray cluster restarts: a full outage of "
        f"{minutes(roll + cold_cluster)}; the GPU surge nodes need spare quota and free capacity "
        "in the cluster placement group (capacity risk on large GPU types); CoreDNS is upgraded "
        "to the version made for the new Kubernetes",
        roll + cold_cluster,
    )


def api_access_effects(before: DeploymentSpec, after: DeploymentSpec) -> list[Effect]:
    if before.api_access_cidrs == after.api_access_cidrs:
        return []
    # EKS UpdateClusterConfig (resourcesVpcConfig.publicAccessCidrs): "your cluster continues
    # to function during the update", a few minutes in UPDATING; no new control plane.
    return [Effect(
        "raypd:apiAccessCidrs", Kind.IN_PLACE,
        "the EKS cluster's public endpoint access list is updated in place (a few minutes; the "
        "cluster and serving keep running, nodes use the private endpoint); from then on only "
        "the listed ranges reach the Kubernetes API: include where pulumi up and the web app "
        "run, or the rest of this update and every later one fail",
    )]


def admin_access_effects(before: DeploymentSpec, after: DeploymentSpec) -> list[Effect]:
    if before.admin_role_arns == after.admin_role_arns:
        return []
    return [Effect("raypd:adminRoleArns", Kind.NO_SERVING_EFFECT,
                   "EKS access entries are added or removed; nothing restarts")]
