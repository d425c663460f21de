"""The expressions of the alerts that say a fault of docs/resilience.md happened (issue 31 §2): a
replica lost, the Ray head restarted or replaced, a system node not Ready. The alerts themselves
(for, severity, words, runbook) are built in components/render/observability_rules.py with the
others; the fault -> alert table is docs/resilience.md's.

What each reads, and why not something else:
- **A replica lost** (its pod, node or process): Ray Serve's controller counts every failed health
  check, including the one that finds the replica's actor dead (metric_names.SERVE_HEALTH_CHECK_FAILURES
  says where). A first start, a scale-up, a scale-down and a planned roll stop or start replicas
  without a failed check, so they count nothing. The replica-starts counter cannot tell a
  replacement from a scale-up (metric_names says why).
- **The head restarted or replaced**: kube-state-metrics, not Ray: a head that restarts takes its
  own metrics with it. Two ways: its `ray-head` container restarted in place (the GCS died: a
  crash, or its Redis gone, which Ray's GCS checks every 100 ms and exits on: gcs_server.cc,
  "Redis connection failed unexpectedly."), or the pod was deleted, evicted or lost with its node
  and KubeRay made a new head pod for the same RayCluster. A first start has no earlier head in
  its RayCluster, and a NewCluster upgrade's head belongs to a new RayCluster (`ray.io/cluster`),
  so neither fires; a drain of the system node the head runs on does (it restarts the head).
- **A system node not Ready**: as the GPU-node alert, on the system role label.
"""

from __future__ import annotations

import re

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import metric_names as m
from components.render.network_policy import RAY_NODE_TYPE_LABEL
from components.render.rayservice import HEAD_CONTAINER, RAY_SERVICE_LABEL
from components.render.serve_config import APP_NAME, serve_deployment_name

# KubeRay's RayCluster label on every Ray pod (ray-operator/controllers/ray/common/pod.go `labelPod`).
RAY_CLUSTER_LABEL = "ray.io/cluster"
# The pod labels kube-state-metrics must export in kube_pod_labels for the head alert (its
# --metric-labels-allowlist=pods=[...]; without one kube_pod_labels has no series at all).
KUBE_STATE_POD_LABELS = (RAY_SERVICE_LABEL, RAY_NODE_TYPE_LABEL, RAY_CLUSTER_LABEL)
# How far back a head restart counts. Longer than the replica window: Prometheus and
# kube-state-metrics run on the system nodes too, and a lost system node takes them away for a
# few minutes (docs/observability.md): the restart must still be inside the window when they return.
HEAD_WINDOW = "15m"
REPLICA_WINDOW = "5m"


def kube_label(key: str) -> str:
    """A Kubernetes label as kube-state-metrics exports it (label_ plus the key, non-alphanumerics
    as `_`: kube-state-metrics internal/store/utils.go `sanitizeLabelName`)."""
    return "label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


def replica_failed_expr(spec: DeploymentSpec) -> str:
    """One series per (phase, deployment, replica) whose health check failed in the window, or
    whose failure counter was born in it (Ray exports a counter only once non-zero, so its first
    sample is already 1). `unless on(deployment, replica)`, not on every label: after a head restart
    the controller's series come from another pod (other `pod`, `instance`) and must not look new."""
    by = f"{m.SERVE_DEPLOYMENT_LABEL}, {m.SERVE_REPLICA_LABEL}"
    parts = []
    for phase in spec.phases:
        sel = (f'{m.SERVE_HEALTH_CHECK_FAILURES}{{{m.SERVE_APPLICATION_LABEL}="{APP_NAME}",'
               f'{m.SERVE_DEPLOYMENT_LABEL}="{serve_deployment_name(phase, spec.model.id)}"}}')
        failed = (f"(sum by ({by}) (increase({sel}[{REPLICA_WINDOW}])) > 0) or "
                  f"(max by ({by}) ({sel} unless on({by}) {sel} offset {REPLICA_WINDOW}))")
        parts.append(f'label_replace({failed}, "{m.PHASE_LABEL}", "{phase}", "", "")')
    return " or ".join(parts)


def _heads(spec: DeploymentSpec, offset: str = "") -> str:
    """This deployment's Ray head pods as kube_pod_labels lists them (any RayCluster of it)."""
    where = (f'{m.POD_NAMESPACE_LABEL}="{spec.namespace}",'
             f'{kube_label(RAY_SERVICE_LABEL)}="{spec.service_name}",'
             f'{kube_label(RAY_NODE_TYPE_LABEL)}="head"')
    return f"{m.KUBE_POD_LABELS}{{{where}}}" + (f" offset {offset}" if offset else "")


def head_restarted_expr(spec: DeploymentSpec) -> str:
    """One series per head pod (namespace, pod, its RayCluster) that restarted in the window: its
    `ray-head` container restarted, or it is a new pod of a RayCluster that had a head before it.
    Pods are matched by uid, not every label: a restarted kube-state-metrics (another `instance`)
    must not make every head look new."""
    cluster = kube_label(RAY_CLUSTER_LABEL)
    pod = f"{m.POD_NAMESPACE_LABEL}, {m.POD_LABEL}"
    heads, before = _heads(spec), _heads(spec, HEAD_WINDOW)
    restarts = (f'{m.KUBE_POD_RESTARTS}{{{m.POD_NAMESPACE_LABEL}="{spec.namespace}",'
                f'container="{HEAD_CONTAINER}"}}')
    in_place = (f"(max by ({pod}) (increase({restarts}[{HEAD_WINDOW}])) > 0) "
                f"* on({pod}) group_left({cluster}) max by ({pod}, {cluster}) ({heads})")
    replaced = (f"max by ({pod}, {cluster}) ({heads} unless on(uid) {before}) "
                f"and on({cluster}) {before}")
    return f"({in_place}) or ({replaced})"


def node_not_ready_expr(role_label: dict[str, str]) -> str:
    """Nodes with the given role label that are not Ready (kube_node_labels needs the key in
    kube-state-metrics' nodes= allowlist: observability_rules.KUBE_STATE_NODE_LABELS). One series
    per node (`max by (node)`): a kube-state-metrics pod that restarts mid-way (another
    `instance`) neither restarts the alert's `for` nor doubles it."""
    key, value = next(iter(role_label.items()))
    ready = f'{m.KUBE_NODE_CONDITION}{{condition="Ready",status="true"}}'
    return (f'max by (node) (({ready} == 0) * on(node) group_left() '
            f'{m.KUBE_NODE_LABELS}{{{kube_label(key)}="{value}"}})')


def system_node_not_ready_expr() -> str:
    return node_not_ready_expr(defaults.SYSTEM_LABELS)


def gpu_node_not_ready_expr() -> str:
    return node_not_ready_expr(defaults.GPU_ROLE_LABEL)
