"""What a change of `raypd:observability` does, for the change preview (components.changes.assess).

- Turning it on or off adds or removes the Ray pods' metrics ports and the head's Prometheus and
  Grafana addresses (components.render.rayservice): a pod-template change, which `assess` already reports
  as a new Ray cluster from the RayService's digest. Here: the metrics stack itself, installed or
  removed beside serving.
- Removing it deletes everything components.stack.observability_stack created, in reverse
  dependency order (`REMOVAL`): the releases and raypd's monitors, then the `monitoring` namespace.
  A StatefulSet keeps its claims (`persistentVolumeClaimRetentionPolicy` defaults to Retain), but
  the namespace does not: Prometheus's and Grafana's claims go with it, and the `raypd-gp3`
  class's reclaimPolicy Delete deletes their EBS volumes. The EBS CSI driver that does it is
  removed after the namespace (the component orders it so). The Prometheus Operator's CRDs go too,
  and deleting a CRD deletes every object of its kind in the cluster.
- A new volume size reaches new volumes only: a StatefulSet's claim templates do not resize
  claims that exist (the `raypd-gp3` class allows expanding one by editing the claim).
- A stack deployed before issue 18 (its outputs have a schemaVersion but no `observability`) gets
  the metrics ports on its first `up` with this raypd, whatever its settings say: a new Ray cluster.
- Prometheus, Grafana and Alertmanager run on the system nodes, their volumes in the system nodes'
  one zone (components.plan.zones.system_zone). A change that rolls, replaces or drains the system
  nodes (a Kubernetes upgrade, a new system instance type, fewer system nodes) restarts them there:
  a gap in the metrics, no alerts meanwhile, nothing lost. On a stack whose system nodes were in
  two zones (outputs without `systemZone`), the first `up` moves the system nodes into one zone
  (components.changes.node_groups.system_zone_migration), and the volumes may be in the other one.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from components.changes.effects import Effect, Kind, minutes
from components.config.spec import DeploymentSpec
from components.plan.durations import CHANGE_TIMES
from components.render.outputs import OBSERVABILITY_KEY, SYSTEM_ZONE_KEY

SUBJECT = "raypd:observability"
# What turning the stack off deletes, in the order the program deletes it, and what stays.
REMOVAL = (
    "the metrics stack is removed, in this order: kube-prometheus-stack, dcgm-exporter and raypd's "
    "monitors, rules and dashboards; then namespace monitoring with Prometheus's and Grafana's "
    "volume claims, so their EBS volumes are deleted (the metrics history, Grafana's users and "
    "any dashboard edited in Grafana are lost: export what you want first); then the raypd-gp3 "
    "storage class and the EBS CSI driver add-on with its IAM role, last, so the driver is there "
    "to detach and delete the volumes. The Prometheus Operator's CRDs go too, and with them every "
    "PodMonitor, ServiceMonitor and PrometheusRule in the cluster, raypd's or not. Kept: nothing "
    "of the metrics stack; serving goes on (the Ray cluster change is listed separately)")
MOVES = "the metrics stack (system nodes)"
# A stack whose system nodes were in two zones: its first `up` moves them into one.
STRANDED = (
    "the system nodes move into one zone (the system node group, above): Prometheus's and Grafana's "
    "EBS volumes were created in the zone of the node they first ran on, either of the stack's two. "
    "If that is not the system nodes' zone (output systemZone after this update), their pods stay "
    "Pending: no metrics, no alerts, and the next chart upgrade fails waiting for them. Check after "
    "the update, and if so delete their claims so they start again, empty, in that zone (the "
    "history and Grafana's database are lost): the commands are in docs/observability.md")


def _system_node_change(before: DeploymentSpec, after: DeploymentSpec) -> Optional[str]:
    """How the system node group changes, in words, or None (the rules of
    components.changes.cluster and components.changes.node_groups)."""
    old_minor = int(before.kubernetes_version.split(".")[1])
    if int(after.kubernetes_version.split(".")[1]) == old_minor + 1:
        return "rolls with the Kubernetes upgrade (surge nodes, then drain)"
    if before.system_nodes.instance_type != after.system_nodes.instance_type:
        return "is replaced (a new instance type; the old nodes drain at the end)"
    if after.system_nodes.count < before.system_nodes.count:
        return "shrinks, and EKS drains the nodes it picks"
    return None


def system_node_effects(before: DeploymentSpec, after: DeploymentSpec,
                        deployed_outputs: Optional[Mapping[str, Any]] = None) -> list[Effect]:
    """What a roll, replacement or drain of the system nodes does to the metrics stack on them."""
    if not (before.observability.enabled and after.observability.enabled):
        return []
    outputs = deployed_outputs or {}
    if "schemaVersion" in outputs and SYSTEM_ZONE_KEY not in outputs:
        return [Effect(MOVES, Kind.NO_SERVING_EFFECT, STRANDED)]
    how = _system_node_change(before, after)
    if how is None:
        return []
    zone = outputs.get(SYSTEM_ZONE_KEY)
    where = f"in {zone}" if isinstance(zone, str) else "in their one zone"
    return [Effect(MOVES, Kind.NO_SERVING_EFFECT, (
        f"the system node group {how}: Prometheus, Grafana and Alertmanager (those on a drained "
        f"node) restart on the system nodes {where}, where their EBS volumes are (the raypd-gp3 "
        "class creates them only there, and the system nodes never leave it): for a few minutes "
        "no samples are collected and no alert is evaluated; the history is kept"))]


def observability_effects(old: DeploymentSpec, new: DeploymentSpec,
                          deployed_outputs: Optional[Mapping[str, Any]] = None) -> list[Effect]:
    """Every effect of going from `old` to `new` on the metrics stack (the module docstring)."""
    before, after = old.observability, new.observability
    effects: list[Effect] = system_node_effects(old, new, deployed_outputs)
    if (after.enabled and before.enabled and deployed_outputs is not None
            and "schemaVersion" in deployed_outputs and OBSERVABILITY_KEY not in deployed_outputs):
        # On the nodes already there, the image cached: a warm start of every engine.
        warm_cluster = CHANGE_TIMES["ray-cluster-warm-nodes"].seconds
        effects.append(Effect(
            "the Ray cluster (observability)", Kind.NEW_RAY_CLUSTER,
            "this raypd installs the metrics stack and gives the Ray pods their metrics ports and "
            f"the head Prometheus's and Grafana's addresses: KubeRay needs a new Ray cluster "
            f"({minutes(warm_cluster)}); set {SUBJECT}.enabled false to keep the pods as they are",
            warm_cluster))
    if before.enabled != after.enabled:
        effects.append(Effect(f"{SUBJECT}.enabled", Kind.IN_PLACE, (
            "kube-prometheus-stack and dcgm-exporter are installed beside serving (a few minutes)"
            if after.enabled else REMOVAL)))
        return effects
    if not after.enabled:
        return effects
    for field, key in (("prometheus_storage_size", "prometheusStorageSize"),
                       ("grafana_storage_size", "grafanaStorageSize")):
        if getattr(before, field) != getattr(after, field):
            effects.append(Effect(f"{SUBJECT}.{key}", Kind.NO_SERVING_EFFECT, (
                "applies to new volumes only: the existing claim keeps its size unless you resize it "
                "(kubectl -n monitoring edit pvc; the raypd-gp3 class allows expansion)")))
    if before.prometheus_retention != after.prometheus_retention:
        effects.append(Effect(f"{SUBJECT}.prometheusRetention", Kind.NO_SERVING_EFFECT,
                              "Prometheus restarts with the new retention (a gap of a minute in "
                              "the metrics); serving is not affected"))
    return effects
