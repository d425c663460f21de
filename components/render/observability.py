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
  say how much of the GPU the engines use (NVIDIA DCGM docs, "Profiling Metrics").
- EFA: node-exporter's infiniband collector is on by default and sees the EFA devices (they live
  under /sys/class/infiniband as rdmap*), but as of node_exporter 1.x it reports only their port
  state and rate: EFA keeps its byte, packet and error counters in ports/*/hw_counters/, which the
  collector does not read (prometheus/node_exporter#3670, "infiniband: add EFA support", open
  since 2026-05-28; #3473 closed). No maintained exporter in these charts exposes EFA rx/tx bytes
  yet, so nothing more is enabled; the NIXL transfer metrics vLLM exports show the KV traffic.
"""

from __future__ import annotations

from typing import Any

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import observability_names as names
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
# (DCGM field, Prometheus type, help): dcgm-exporter's CSV format (etc/default-counters.csv).
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
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (busy or idle per sample, in %)."),
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
        "kube-state-metrics": {**_system(), "metricLabelsAllowlist": [
            f"nodes=[{','.join(KUBE_STATE_NODE_LABELS)}]"]},
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


def dcgm_metrics_csv() -> str:
    """dcgm-exporter's counters file (its `customMetrics` value)."""
    lines = ["# DCGM field, Prometheus metric type, help message (raypd, issue 18)"]
    lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in DCGM_FIELDS]
    return "\n".join(lines) + "\n"


def dcgm_exporter_values() -> dict[str, Any]:
    """dcgm-exporter on the GPU nodes only (raypd's GPU role label and taint toleration). Its
    chart's ServiceMonitor is kept: one Service in front of one DaemonSet counts each GPU once.
    `honorLabels` keeps the exporter's pod/namespace labels (the pod using the GPU, read from the
    kubelet's pod-resources API) rather than renaming them to exported_pod."""
    return {
        "customMetrics": dcgm_metrics_csv(),
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

