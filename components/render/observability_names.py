"""Names the parts of the metrics stack (issue 18) agree on: namespace, releases, Services, ports.

The Pulumi program installs the charts under these names, the Ray head is told the Services'
URLs (RAY_PROMETHEUS_HOST, RAY_GRAFANA_HOST), the NetworkPolicies admit Prometheus's pods by their
labels, and the stack outputs and docs show the same URLs; one module keeps them from drifting.
It imports nothing of raypd's but defaults, so components.render.rayservice can use it.

`fullnameOverride` fixes the Services' names whatever the release is called: kube-prometheus-stack
names its Prometheus Service `<fullname>-prometheus` (templates/prometheus/service.yaml) and the
Prometheus object the same, and the Prometheus Operator labels that object's pods
`app.kubernetes.io/name: prometheus`, `app.kubernetes.io/instance: <object name>` (prometheus-
operator pkg/prometheus/server/operator.go, v0.93); the Grafana subchart names its Service
`<fullnameOverride>` on port 80 (service.port). The chart's Grafana data source is named
`Prometheus` (grafana.sidecar.datasources.name), the name Ray's dashboard asks for by default
(RAY_PROMETHEUS_NAME), so the head needs no more than the two hosts.
"""

from __future__ import annotations

from typing import Any, Final

from components.config import defaults

NAMESPACE: Final = defaults.OBSERVABILITY_NAMESPACE
STACK_RELEASE: Final = "kube-prometheus-stack"
DCGM_RELEASE: Final = "dcgm-exporter"
FULLNAME: Final = "raypd"
PROMETHEUS_SERVICE: Final = f"{FULLNAME}-prometheus"
GRAFANA_SERVICE: Final = f"{FULLNAME}-grafana"
PROMETHEUS_POD_LABELS: Final = {
    "app.kubernetes.io/name": "prometheus",
    "app.kubernetes.io/instance": PROMETHEUS_SERVICE,
}
# The label Grafana's dashboard sidecar watches for (kube-prometheus-stack's default).
DASHBOARD_LABEL: Final = "grafana_dashboard"
DASHBOARD_LABEL_VALUE: Final = "1"
# Where `kubectl port-forward` puts Grafana on the user's machine; Ray's dashboard embeds the
# panels from there (RAY_GRAFANA_IFRAME_HOST is the address the browser loads).
GRAFANA_LOCAL_PORT: Final = 3000
STORAGE_CLASS: Final = "raypd-gp3"


def _service_url(service: str, port: int) -> str:
    suffix = "" if port == 80 else f":{port}"
    return f"http://{service}.{NAMESPACE}.svc.cluster.local{suffix}"


def prometheus_url() -> str:
    return _service_url(PROMETHEUS_SERVICE, defaults.PROMETHEUS_PORT)


def grafana_url() -> str:
    return _service_url(GRAFANA_SERVICE, defaults.GRAFANA_PORT)


def grafana_port_forward_command() -> str:
    return (f"kubectl -n {NAMESPACE} port-forward svc/{GRAFANA_SERVICE} "
            f"{GRAFANA_LOCAL_PORT}:{defaults.GRAFANA_PORT}")


def head_metrics_ports() -> list[dict[str, Any]]:
    """The Ray head's metrics ports, named as the head PodMonitor scrapes them. KubeRay adds
    `metrics` on its own (DefaultMetricsPort) but not the other two; naming all three keeps the
    PodMonitor independent of that default."""
    return [
        {"containerPort": defaults.RAY_METRICS_PORT, "name": "metrics"},
        {"containerPort": defaults.RAY_AUTOSCALER_METRICS_PORT, "name": "as-metrics"},
        {"containerPort": defaults.RAY_DASHBOARD_METRICS_PORT, "name": "dash-metrics"},
    ]


def worker_metrics_ports() -> list[dict[str, Any]]:
    """vLLM's engine metrics are exported through the worker's Ray metrics agent on 8080."""
    return [{"containerPort": defaults.RAY_METRICS_PORT, "name": "metrics"}]


def head_metrics_env() -> list[dict[str, Any]]:
    """What Ray's dashboard needs to embed Grafana panels (Ray docs, "Embed Grafana
    visualizations into Ray Dashboard"): the in-cluster Prometheus and Grafana for the head's own
    queries, and the address the user's browser reaches Grafana at (the port-forward)."""
    return [
        {"name": "RAY_PROMETHEUS_HOST", "value": prometheus_url()},
        {"name": "RAY_GRAFANA_HOST", "value": grafana_url()},
        {"name": "RAY_GRAFANA_IFRAME_HOST", "value": f"http://127.0.0.1:{GRAFANA_LOCAL_PORT}"},
    ]
