"""What a change of `raypd:observability` does, for the change preview (components.changes.assess).

- Turning it on or off adds or removes the Ray pods' metrics ports and the head's Prometheus and
  Grafana addresses (components.render.rayservice): a pod-template change, which `assess` already reports
  as a new Ray cluster from the RayService's digest. Here: the metrics stack itself, installed or
  removed beside serving.
- Removing it deletes the Helm releases, but not Prometheus's volume: Kubernetes keeps a
  StatefulSet's PersistentVolumeClaims when the StatefulSet goes (StatefulSet
  `persistentVolumeClaimRetentionPolicy` defaults to Retain), so the EBS volume is billed until
  its claim is deleted. Grafana's claim belongs to its chart and goes with it.
- A new volume size reaches new volumes only: a StatefulSet's claim templates do not resize
  claims that exist (the `raypd-gp3` class allows expanding one by editing the claim).
- A stack deployed before issue 18 (its outputs have a schemaVersion but no `observability`) gets
  the metrics ports on its first `up` with this raypd, whatever its settings say: a new Ray cluster.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from components.changes.assess import Effect, Kind, minutes
from components.config.observability_spec import ObservabilitySpec
from components.plan.durations import CHANGE_TIMES
from components.render.outputs import OBSERVABILITY_KEY

SUBJECT = "raypd:observability"


def observability_effects(before: ObservabilitySpec, after: ObservabilitySpec,
                          deployed_outputs: Optional[Mapping[str, Any]] = None) -> list[Effect]:
    """Every effect of going from `before` to `after` (see the module docstring)."""
    effects: list[Effect] = []
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
            if after.enabled else
            "the metrics stack is removed; Prometheus's EBS volume stays (a StatefulSet's claim is "
            "kept): delete its PersistentVolumeClaim in namespace monitoring to stop paying for it")))
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
