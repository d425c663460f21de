"""What the metrics stack looks like (issue 18 §1): chart values and monitor objects, as plain dicts.

Pure: a spec in, manifests and Helm values out; components.stack.observability_stack only wires them.

- kube-prometheus-stack (Prometheus Operator, Prometheus, Grafana, Alertmanager, kube-state-
  metrics, node-exporter): everything but the node-exporter DaemonSet on the system nodes (the
  nodeSelector the KubeRay operator and the Ray head use), Prometheus and Grafana on EBS volumes
  of the configured sizes. The `*SelectorNilUsesHelmValues: false` settings make Prometheus take
  every PodMonitor, ServiceMonitor and PrometheusRule, not only those labelled with the release,
  so raypd's own objects need no chart-specific label. The control-plane monitors are off: EKS
  does not expose etcd, the scheduler or the controller manager, and its kube-proxy listens for
  metrics on 127.0.0.1 only, so those targets would be down and their alerts fire forever.
- The Ray pods are scraped by two PodMonitors (KubeRay's Prometheus guide): the head on
  `metrics`, `as-metrics` and `dash-metrics`; the GPU workers on `metrics` (8080), where vLLM's
  engine metrics come out of each worker's Ray metrics agent. Not ServiceMonitors: a RayService
  has two Services selecting the head (<name>-head-svc and <name>-serve-svc), so a ServiceMonitor
  would scrape it twice.
- dcgm-exporter on the GPU nodes with the profiling (DCP) fields: `DCGM_FI_DEV_GPU_UTIL` only says
  whether a kernel ran in the sample period; GR_ENGINE_ACTIVE, SM_ACTIVE and PIPE_TENSOR_ACTIVE
  say how much of the GPU the engines use (NVIDIA DCGM docs, "Profiling Metrics"). How the
  exporter gets raypd's list: see `dcgm_exporter_values`.
- EFA: node-exporter's infiniband collector is on by default and sees the EFA devices (they live
  under /sys/class/infiniband as rdmap*), but as of node_exporter 1.x it reports only their port
  state and rate: EFA keeps its byte, packet and error counters in ports/*/hw_counters/, which the
  collector does not read (prometheus/node_exporter#3670, "infiniband: add EFA support", open
  since 2026-05-28; #3473 closed). No maintained exporter in these charts exposes EFA rx/tx bytes
  yet, so nothing more is enabled; the NIXL transfer metrics vLLM exports show the KV traffic.
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import observability_names as names
from components.render.observability_faults import KUBE_STATE_POD_LABELS
from components.render.observability_rules import KUBE_STATE_NODE_LABELS
from components.render.rayservice import RAY_SERVICE_LABEL

MONITORING_API = "monitoring.coreos.com/v1"
# KubeRay's node-type label (ray-operator/controllers/ray/utils/constant.go, v1.4.0).
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
# The same taint toleration raypd's GPU pods and device plugins carry (components.stack.addons).
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SCRAPE_INTERVAL = "15s"
SCRAPE_TIMEOUT = "10s"
# Ray's own Grafana dashboards filter on ray_io_cluster (KubeRay's PodMonitor relabels it).
RAY_CLUSTER_RELABELING = {
    "sourceLabels": ["__meta_kubernetes_pod_label_ray_io_cluster"],
    "targetLabel": "ray_io_cluster",
}
# Where the exporter reads raypd's counters (dcgm_exporter_values): a file of the chart's fixed
# ConfigMap (templates/metrics-configmap.yaml names it), mounted beside the image's own lists.
DCGM_CHART_CONFIG_MAP = "exporter-metrics-config-map"
DCGM_COUNTERS_VOLUME = "raypd-counters"
DCGM_COUNTERS_FILE = "raypd-counters.csv"
DCGM_COUNTERS_PATH = f"/etc/dcgm-exporter/{DCGM_COUNTERS_FILE}"
DCGM_COUNTERS_ANNOTATION = "raypd.io/dcgm-counters-sha256"
# (DCGM field, Prometheus type, help): dcgm-exporter's CSV format (etc/default-counters.csv). No
# comma or quote in a help text: the exporter reads the file with Go's encoding/csv, where a comma
# makes a fourth field and the exporter exits (tests/unit/test_dcgm_counters.py).
DCGM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio of cycles an SM has at least one warp assigned."),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "Ratio of warps resident on an SM to its maximum."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "PCIe bytes transmitted per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "PCIe bytes received per second."),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "NVLink bytes transmitted per second."),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "NVLink bytes received per second."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %: busy or idle per sample)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
)


def _system() -> dict[str, Any]:
    return {"nodeSelector": dict(defaults.SYSTEM_LABELS)}


def _volume_claim(size: str) -> dict[str, Any]:
    return {"spec": {
        "storageClassName": names.STORAGE_CLASS,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }}


def kube_prometheus_stack_values(spec: DeploymentSpec) -> dict[str, Any]:
    """Helm values of kube-prometheus-stack (see the module docstring for each choice)."""
    settings = spec.observability
    return {
        "fullnameOverride": names.FULLNAME,
        # raypd applies the Operator's CRDs itself (components.stack.observability_stack).
        "crds": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "prometheusOperator": {
            **_system(),
            "admissionWebhooks": {"patch": _system()},
        },
        "prometheus": {"prometheusSpec": {
            **_system(),
            "retention": settings.prometheus_retention,
            "retentionSize": settings.prometheus_retention_size,
            "storageSpec": {"volumeClaimTemplate": _volume_claim(settings.prometheus_storage_size)},
            "podMonitorSelectorNilUsesHelmValues": False,
            "serviceMonitorSelectorNilUsesHelmValues": False,
            "ruleSelectorNilUsesHelmValues": False,
        }},
        "alertmanager": {"alertmanagerSpec": _system()},
        # kube_node_labels carries only the node labels listed here (kube-state-metrics'
        # --metric-labels-allowlist): the GPU-node alert and the per-phase GPU and per-type node
        # panels join on them.
        # kube_pod_labels likewise carries only the pod labels listed (and has no series at all
        # without a pods= entry): the head-restart alert finds this deployment's head pods by them.
        "kube-state-metrics": {**_system(), "metricLabelsAllowlist": [
            f"nodes=[{','.join(KUBE_STATE_NODE_LABELS)}]",
            f"pods=[{','.join(KUBE_STATE_POD_LABELS)}]"]},
        "grafana": {
            "fullnameOverride": names.GRAFANA_SERVICE,
            **_system(),
            "persistence": {"enabled": True, "type": "pvc", "size": settings.grafana_storage_size,
                            "storageClassName": names.STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"]},
            # One ReadWriteOnce volume: a rolling update's new pod could not mount it.
            "deploymentStrategy": {"type": "Recreate"},
            # Ray's dashboard embeds Grafana panels in an iframe (RAY_GRAFANA_IFRAME_HOST).
            "grafana.ini": {"security": {"allow_embedding": True}},
            "sidecar": {"dashboards": {
                "enabled": True,
                "label": names.DASHBOARD_LABEL,
                "labelValue": names.DASHBOARD_LABEL_VALUE,
                "searchNamespace": [names.NAMESPACE],
            }},
        },
    }


def dcgm_metrics_csv(fields: tuple[tuple[str, str, str], ...] = DCGM_FIELDS) -> str:
    """dcgm-exporter's counters file (its `customMetrics` value)."""
    lines = ["# DCGM field, Prometheus metric type, help message (raypd, issue 18)"]
    lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in fields]
    return "\n".join(lines) + "\n"


def dcgm_exporter_values(fields: tuple[tuple[str, str, str], ...] = DCGM_FIELDS) -> dict[str, Any]:
    """dcgm-exporter on the GPU nodes only (raypd's GPU role label and taint toleration). Its
    chart's ServiceMonitor is kept: one Service in front of one DaemonSet counts each GPU once.
    `honorLabels` keeps the exporter's pod/namespace labels (the pod using the GPU, read from the
    kubelet's pod-resources API) rather than renaming them to exported_pod.

    How the exporter reads raypd's counters (NVIDIA/dcgm-exporter 4.5.3-4.8.2): the chart puts
    `customMetrics` in its ConfigMap `exporter-metrics-config-map`, key `metrics`
    (templates/metrics-configmap.yaml), and the exporter reads the file named by `-f`
    (internal/pkg/counters/counter_config.go). raypd mounts that key as its own file and points
    `-f` at it, instead of relying on the chart's defaults (which mount it over the image's
    default-counters.csv): if the mount ever went missing the exporter would stop on a missing
    file, not silently fall back to NVIDIA's list. Not `-m <namespace>:<configmap>`: that reads the
    ConfigMap through the Kubernetes API, and the chart mounts no service-account token unless pod
    labels, pod UIDs or DRA are enabled (templates/daemonset.yaml `automountServiceAccountToken`),
    so the exporter would exit at start. A subPath mount never changes inside a running container
    and the exporter reads the file once, so the list's digest is a pod annotation: a new list
    rolls the DaemonSet."""
    counters = dcgm_metrics_csv(fields)
    return {
        "customMetrics": counters,
        "arguments": ["-f", DCGM_COUNTERS_PATH],
        "extraConfigMapVolumes": [{"name": DCGM_COUNTERS_VOLUME, "configMap": {
            "name": DCGM_CHART_CONFIG_MAP,
            "items": [{"key": "metrics", "path": DCGM_COUNTERS_FILE}]}}],
        "extraVolumeMounts": [{"name": DCGM_COUNTERS_VOLUME, "mountPath": DCGM_COUNTERS_PATH,
                               "subPath": DCGM_COUNTERS_FILE, "readOnly": True}],
        "podAnnotations": {DCGM_COUNTERS_ANNOTATION: hashlib.sha256(counters.encode()).hexdigest()[:16]},
        "nodeSelector": dict(defaults.GPU_ROLE_LABEL),
        "tolerations": [dict(GPU_TOLERATION)],
        "serviceMonitor": {"enabled": True, "interval": SCRAPE_INTERVAL, "honorLabels": True},
    }


def _pod_monitor(spec: DeploymentSpec, role: str, ports: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": MONITORING_API,
        "kind": "PodMonitor",
        "metadata": {
            "name": f"{spec.service_name}-{role}",
            "namespace": names.NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "raypd"},
        },
        "spec": {
            "namespaceSelector": {"matchNames": [spec.namespace]},
            "selector": {"matchLabels": {RAY_SERVICE_LABEL: spec.service_name,
                                         RAY_NODE_TYPE_LABEL: role}},
            "podMetricsEndpoints": [
                {"port": port, "interval": SCRAPE_INTERVAL, "scrapeTimeout": SCRAPE_TIMEOUT,
                 "relabelings": [dict(RAY_CLUSTER_RELABELING)]}
                for port in ports
            ],
        },
    }


def pod_monitors(spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """The head's and the workers' PodMonitors, by role. Selected by raypd's RayService label
    (stable across a NewCluster upgrade, unlike ray.io/cluster) and KubeRay's node type."""
    head_ports = [port["name"] for port in names.head_metrics_ports()]
    worker_ports = [port["name"] for port in names.worker_metrics_ports()]
    return {
        "head": _pod_monitor(spec, "head", head_ports),
        "worker": _pod_monitor(spec, "worker", worker_ports),
    }


def prometheus_rule(spec: DeploymentSpec, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule holding `groups` (components.render.observability_rules)."""
    return {
        "apiVersion": MONITORING_API,
        "kind": "PrometheusRule",
        "metadata": {"name": f"{spec.service_name}-rules", "namespace": names.NAMESPACE,
                     "labels": {"app.kubernetes.io/part-of": "raypd"}},
        "spec": {"groups": groups},
    }


def prometheus_peers() -> list[dict[str, Any]]:
    """NetworkPolicy peers for Prometheus's pods (components.render.network_policy `metrics_peers`)."""
    return [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": names.NAMESPACE}},
        "podSelector": {"matchLabels": dict(names.PROMETHEUS_POD_LABELS)},
    }]


def crd_urls() -> list[str]:
    """The Prometheus Operator's CRDs, of the version the pinned chart runs."""
    return [defaults.PROMETHEUS_OPERATOR_CRDS_URL.format(
        version=defaults.PROMETHEUS_OPERATOR_VERSION, kind=kind)
        for kind in defaults.PROMETHEUS_OPERATOR_CRD_KINDS]

