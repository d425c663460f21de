"""PodDisruptionBudgets for the Ray worker groups: pure functions, plan in, manifests out.

A budget limits VOLUNTARY evictions (kubectl drain, EKS's managed node group updates, Cluster
Autoscaler's scale-down); nothing stops a node or pod from dying. What raypd renders, and why:

- **minAvailable, an integer, never maxUnavailable.** Kubernetes' disruption controller resolves
  maxUnavailable (an integer too, not only a percentage) and a percentage minAvailable through the
  pods' controller's `scale` subresource (pkg/controller/disruption/disruption.go,
  `getExpectedPodCount` -> `getExpectedScale` -> `getScaleController`). Ray pods belong to a
  RayCluster, whose CRD has no scale subresource (KubeRay 1.4.0 and 1.7.0 helm-chart/kuberay-operator/
  crds/ray.io_rayclusters.yaml: `subresources: {status: {}}`), so such a budget fails its sync
  ("rayclusters.ray.io does not implement the scale subresource", kuberay#2662) and `failSafe` sets
  disruptionsAllowed to 0: every drain of a GPU node blocks for good. An integer minAvailable is
  counted over the selected pods directly (`expectedCount = len(pods)`), with no controller lookup.
- **minAvailable = the group's pods at its minimum, minus one**: at that size one worker pod (one
  GPU node) of a group goes at a time, the next only once the replacement pod is Ready. An
  autoscaled group running above its minimum may lose several at once, down to that floor: an
  integer cannot follow the live size (the live size is what the scale subresource would give). Never all of them: a
  budget that allows no eviction at all (minAvailable = the pods) blocks a node drain forever:
  EKS fails a managed node group update with PodEvictionFailure after 15 minutes (issue 14's
  rolls, a Kubernetes upgrade), and `pulumi up` with it.
- **No budget for a group of one pod, nor for the head** (one pod): minAvailable 0 allows every
  eviction, so it would be an object that protects nothing; minAvailable 1 blocks every drain of
  its node forever, as above, including the system node's roll in a Kubernetes upgrade. What
  makes losing the head cheap is GCS fault tolerance (docs/resilience.md), not a budget.
- **What it cannot do** (docs/resilience.md): a phase with a single engine loses it to any drain
  of its node, budget or not; the budget counts a pod healthy when its Ray worker is Ready, which
  is before the engine on it has loaded the model, so a drain that follows at once may take a
  phase's second engine while the first still loads (components.changes.node_groups prices both).
- **The selector follows the live cluster**: raypd's RAY_SERVICE_LABEL (the same across the
  RayClusters a NewCluster upgrade creates, unlike KubeRay's ray.io/cluster, which names one
  generation), KubeRay's ray.io/node-type worker and ray.io/group <group> (labels KubeRay sets on
  every pod and lets no template override: ray-operator/controllers/ray/common/pod.go `labelPod`,
  keys in utils/constant.go). During a switch both generations' pods count, which only allows more.
- `unhealthyPodEvictionPolicy: AlwaysAllow`: a worker that is not Ready (a crashed or wedged
  engine's pod) never holds a drain up (policy/v1, GA in Kubernetes 1.31; raypd's versions are newer).
"""

from __future__ import annotations

from typing import Any, Optional

from components.plan.topology import DeploymentPlan, GpuGroupPlan
from components.render.network_policy import RAY_NODE_TYPE_LABEL
from components.render.rayservice import RAY_SERVICE_LABEL, labels

POLICY_API = "policy/v1"
KIND = "PodDisruptionBudget"
# KubeRay's worker group label (ray-operator/controllers/ray/utils/constant.go RayNodeGroupLabelKey).
RAY_GROUP_LABEL = "ray.io/group"
UNHEALTHY_POD_EVICTION_POLICY = "AlwaysAllow"


def budget_floor(group: GpuGroupPlan) -> Optional[int]:
    """The minAvailable of a worker group's budget: its pods at the group's minimum (one worker pod
    per GPU node) minus one; None, and no budget, when that is 0 (see the module docstring)."""
    floor = group.min_nodes - 1
    return floor if floor >= 1 else None


def worker_selector(service_name: str, group_name: str) -> dict[str, str]:
    """The worker pods of one group, of every RayCluster generation of the RayService."""
    return {RAY_SERVICE_LABEL: service_name, RAY_NODE_TYPE_LABEL: "worker", RAY_GROUP_LABEL: group_name}


def budget_name(service_name: str, group_name: str) -> str:
    return f"{service_name}-{group_name}-workers"


def disruption_budgets(plan: DeploymentPlan) -> list[dict[str, Any]]:
    """One budget per worker group of two pods or more at its minimum, in the plan's group order."""
    spec = plan.spec
    budgets = []
    for group in plan.groups:
        floor = budget_floor(group)
        if floor is None:
            continue
        budgets.append({
            "apiVersion": POLICY_API,
            "kind": KIND,
            "metadata": {"name": budget_name(spec.service_name, group.name), "namespace": spec.namespace,
                         "labels": labels(spec)},
            "spec": {
                "minAvailable": floor,
                "selector": {"matchLabels": worker_selector(spec.service_name, group.name)},
                "unhealthyPodEvictionPolicy": UNHEALTHY_POD_EVICTION_POLICY,
            },
        })
    return budgets
