"""The Ray autoscaler of a RayService: which worker pods it may add and when it removes them.

KubeRay runs Ray's autoscaler beside the head (`enableInTreeAutoscaling`); it adds a GPU worker pod
when Serve asks for an engine no running worker can hold, and removes a worker that has held none
for the idle timeout. Serve decides how many engines run (fixed `replicas`, or its autoscaler within
a phase's autoscaling block: components.render.serve_autoscaling); the node group, and the node
autoscaler on it, decide how many nodes those pods get. components.render.rayservice renders what
this module decides into `rayClusterConfig`.
"""

from __future__ import annotations

import copy
from typing import Any

from components.config import defaults
from components.plan.topology import GpuGroupPlan

# Every worker group's maxReplicas: the most worker pods (one per GPU node) the autoscaler may ask
# for. Two phases of at most defaults.MAX_PHASE_REPLICAS engines each share a group at most, and an
# engine never takes more than one node, so this covers every phase's maxReplicas x nodes per
# engine (tests/unit/test_rayservice.py holds it); the node group's maximum size, not this, bounds
# what can run (a worker pod beyond it stays Pending).
MAX_WORKERS_PER_GROUP = 2 * defaults.MAX_PHASE_REPLICAS
# A worker pod with no engine for this long is removed, which frees its GPU node for the node
# autoscaler to remove after its own delay (docs/scaling.md). 900 s, not Ray's default 60: a worker
# kept warm has the image pulled and the weights in its page cache, so an engine Serve adds back
# within 15 minutes of a scale-down starts in about a model load (components.plan.typical_durations
# engine-restart, ~4 min, far less from the page cache) instead of a new node's cold start
# (components.plan.scaling, ~16 min); and it keeps pods from churning while an application builds
# or retries a failed deploy. The price: up to 15 minutes of an idle GPU node after each
# scale-down. One value for fixed and autoscaled stacks alike: `autoscalerOptions` is part of the
# cluster KubeRay hashes (components.render.rayservice), so a value that followed the autoscaling
# block would rebuild the Ray cluster whenever autoscaling is turned on or off.
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 900
# The autoscaler container beside the Ray head (KubeRay's default is 500m / 512Mi; it idles in a
# loop): small, so that two heads (a zero-downtime switch) fit one system node with the operator,
# CoreDNS and the node's daemonsets.
AUTOSCALER_RESOURCES = {"requests": {"cpu": "100m", "memory": "512Mi"},
                        "limits": {"memory": "512Mi"}}


def autoscaler_options() -> dict[str, Any]:
    """`rayClusterConfig.autoscalerOptions` (KubeRay's RayCluster CRD, 1.4.0 and 1.7.0)."""
    return {
        "upscalingMode": "Default",
        "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
        "resources": copy.deepcopy(AUTOSCALER_RESOURCES),
    }


def worker_group_bounds(group: GpuGroupPlan) -> dict[str, int]:
    """A worker group's `replicas`, `minReplicas` and `maxReplicas`.

    `replicas` is where the cluster starts (the group's nodes at the phases' starting counts); from
    then on the autoscaler owns the count. The bounds are fixed (0 and MAX_WORKERS_PER_GROUP), not
    the phases' autoscaling minReplicas and maxReplicas x nodes per engine, on purpose: KubeRay
    leaves a worker group's replicas, minReplicas and maxReplicas out of the hash it compares
    (ray-operator/controllers/ray/utils/util.go `GenerateHashWithoutReplicasAndWorkersToDelete`)
    and updates a running RayCluster only when that hash, or the number of worker groups, changes
    (rayservice_controller.go `shouldUpdateCluster`, KubeRay 1.4.0 to 1.7.0): bounds taken from the
    autoscaling block would keep the values of the first deploy for the cluster's whole life, and a
    minimum lowered later would hold GPU nodes the node autoscaler could remove. Fixed bounds lose
    nothing: Serve keeps its minReplicas engines running, so their workers are never idle, and never
    asks for more than maxReplicas; the ceiling covers every phase's maximum (MAX_WORKERS_PER_GROUP).
    """
    return {"replicas": group.nodes, "minReplicas": 0, "maxReplicas": MAX_WORKERS_PER_GROUP}
