"""What a change of `raypd:faultTolerance` does, for the change preview (components.changes.assess).

- Turning GCS fault tolerance on or off, or pointing it at another Redis, changes the RayService's
  `rayClusterConfig.gcsFaultToleranceOptions` (components.render.gcs_fault_tolerance): KubeRay
  needs a new Ray cluster for it (the head's env and rayStartParams change; its hash,
  rayservice_controller.go `generateHashWithoutReplicasAndWorkersToDelete`), which `assess`
  already reports from the RayService's digest, with either strategy's cost (components.changes.
  rayservice names the cause). Here: the Redis beside it.
- gcs elasticache on: the replication group is created before the new Ray cluster starts (the
  RayService waits for it), adding ElastiCache's creation time to the update.
- gcs elasticache off: the replication group, its Secret and security group are deleted after the
  RayService's update; the old Ray cluster's Redis clean-up Job (KubeRay's finalizer) runs first.
- cacheNodeType: ElastiCache changes the node type in place (online vertical scaling for a
  replication group with a replica: replicas first, then a failover to a resized node): the GCS
  retries its Redis requests through the seconds of the failover; serving goes on.
- A stack deployed before issue 31 (outputs with a schemaVersion but no `faultTolerance`) gains the
  options on its first `up` with this raypd when its gcs is not off: a new Ray cluster, though its
  settings did not change.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from components.changes.effects import Effect, Kind, minutes
from components.config.spec import DeploymentSpec
from components.plan.durations import TYPICAL_SECONDS
from components.render.outputs import FAULT_TOLERANCE_KEY

SUBJECT = "raypd:faultTolerance"
_STORES = {"elasticache": "an ElastiCache for Valkey group raypd creates", "external": "your Redis",
           "off": "no Redis"}


def fault_tolerance_effects(before: DeploymentSpec, after: DeploymentSpec,
                            deployed_outputs: Optional[Mapping[str, Any]] = None) -> list[Effect]:
    """Every effect of going from `before` to `after` on the GCS's Redis (the module docstring)."""
    old, new = before.gcs_store, after.gcs_store
    effects: list[Effect] = []
    outputs = deployed_outputs or {}
    if new != "off" and "schemaVersion" in outputs and FAULT_TOLERANCE_KEY not in outputs:
        cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
        effects.append(Effect(
            "the Ray cluster (GCS fault tolerance)", Kind.NEW_RAY_CLUSTER,
            f"this raypd gives the Ray head GCS fault tolerance ({_STORES[new]}): the head's Redis "
            f"settings change, so KubeRay needs a new Ray cluster ({minutes(cold_cluster)}); set "
            f"{SUBJECT}.gcs off to keep the cluster as it is", cold_cluster))
    if old != new:
        detail = f"{old} -> {new}: the Ray head keeps its state in {_STORES[new]} from now on"
        if new == "elasticache":
            detail += ("; the replication group (two nodes, TLS, an auth token in a Secret) is "
                       "created first, and the new Ray cluster starts once it is available")
        if old == "elasticache":
            detail += ("; the replication group, its Secret and security group are deleted after "
                       "the Ray cluster moves off them (its keys are cleaned up first)")
        if new == "off":
            detail += "; from then on a restart of the head pod restarts every engine"
        effects.append(Effect(f"{SUBJECT}.gcs", Kind.IN_PLACE, detail))
    elif new == "elasticache" and before.fault_tolerance.cache_node_type != after.fault_tolerance.cache_node_type:
        effects.append(Effect(
            f"{SUBJECT}.cacheNodeType", Kind.NO_SERVING_EFFECT,
            f"{before.fault_tolerance.cache_node_type} -> {after.fault_tolerance.cache_node_type}: "
            "ElastiCache resizes the nodes in place (the replica first, then a failover of a few "
            "seconds, which the GCS rides out by retrying); serving is not affected"))
    return effects
