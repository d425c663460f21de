"""The metrics stack's renderers (components.render.observability, issue 18 §1): PodMonitors and the
PrometheusRule fit the Prometheus Operator's CRD schemas, the monitors scrape ports the Ray pods
really name, the charts' values use keys the charts have and put their pods where raypd says, and
only Prometheus (besides the API server) reaches the metrics ports."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

from components.config import defaults
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render import observability_names as names
from components.render.network_policy import render_network_policies
from components.render.observability import (
    dcgm_exporter_values,
    kube_prometheus_stack_values,
    pod_monitors,
    prometheus_peers,
    prometheus_rule,
)
from components.render.observability_rules import prometheus_rule_groups
from components.render.rayservice import render_rayservice
from tests.strict_schema import strict
from tests.unit.network_policy_eval import Pod, may_reach
from tests.unit.test_network_policy import head, kuberay_pod, worker

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CRD_FILES = {"PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
             "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml"}
HETEROGENEOUS = {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
                 "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8}}
OFF = {"raypd:observability": {"enabled": False}}
PROMETHEUS_POD = Pod(names.NAMESPACE, {**names.PROMETHEUS_POD_LABELS, "prometheus": "raypd-prometheus"})


def spec_of(config: dict[str, Any] | None = None) -> DeploymentSpec:
    return DeploymentSpec.from_config(config or {}, "dev")



@lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((FIXTURES / "crds" / CRD_FILES[kind]).read_text(encoding="utf-8"))
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1" and v["served"]]
    schema = strict(served["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    validator = jsonschema.Draft7Validator(crd_schema(manifest["kind"]))
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(manifest)]


@lru_cache(maxsize=None)
def chart_defaults(file_name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / "charts" / file_name).read_text(encoding="utf-8"))


def leaf_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaf_paths(value, (*prefix, key))
    else:
        yield prefix


def unknown_keys(values: dict[str, Any], chart: dict[str, Any]) -> list[str]:
    """Paths of `values` the chart's defaults do not have, down to where the default is an empty
    map or a list (free-form there: nodeSelector {}, storageSpec {})."""
    unknown = []
    for path in leaf_paths(values):
        node: Any = chart
        for depth, key in enumerate(path):
            if isinstance(node, dict) and not node and depth > 0:
                break
            if not isinstance(node, dict) or key not in node:
                unknown.append(".".join(path[:depth + 1]))
                break
            node = node[key]
    return unknown


def ray_templates(spec: DeploymentSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    config = render_rayservice(plan_deployment(spec), f"{defaults.REGION}a")["spec"]["rayClusterConfig"]
    return config["headGroupSpec"]["template"], [g["template"] for g in config["workerGroupSpecs"]]


def port_names(template: dict[str, Any]) -> set[str]:
    return {port["name"] for container in template["spec"]["containers"]
            for port in container.get("ports") or []}


# ---- CRD schemas ----

@pytest.mark.parametrize("config", [{}, HETEROGENEOUS, {"raypd:serviceName": "qwen", "raypd:namespace": "llm"}])
def test_every_pod_monitor_fits_the_operators_crd_schema(config):
    for role, monitor in pod_monitors(spec_of(config)).items():
        assert not schema_errors(monitor), (role, schema_errors(monitor)[:5])


def test_the_prometheus_rule_fits_the_operators_crd_schema():
    spec = spec_of()
    assert not schema_errors(prometheus_rule(spec, prometheus_rule_groups(spec)))


def test_the_strict_schema_catches_a_misspelt_field():
    monitor = pod_monitors(spec_of())["head"]
    monitor["spec"]["podMetricEndpoints"] = monitor["spec"].pop("podMetricsEndpoints")
    assert schema_errors(monitor)


# ---- what the PodMonitors scrape ----

@pytest.mark.parametrize("config", [{}, HETEROGENEOUS])
def test_the_head_monitor_scrapes_the_three_ports_kuberays_guide_names_and_the_head_has_them(config):
    spec = spec_of(config)
    monitor = pod_monitors(spec)["head"]
    scraped = [endpoint["port"] for endpoint in monitor["spec"]["podMetricsEndpoints"]]
    assert scraped == ["metrics", "as-metrics", "dash-metrics"]
    head_template, _ = ray_templates(spec)
    assert set(scraped) <= port_names(head_template)


@pytest.mark.parametrize("config", [{}, HETEROGENEOUS])
def test_the_worker_monitor_scrapes_port_8080_on_every_gpu_worker(config):
    spec = spec_of(config)
    monitor = pod_monitors(spec)["worker"]
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    _, workers = ray_templates(spec)
    for template in workers:
        ports = {p["name"]: p["containerPort"] for c in template["spec"]["containers"]
                 for p in c.get("ports") or []}
        assert ports["metrics"] == defaults.RAY_METRICS_PORT == 8080


def test_each_monitor_selects_its_own_kind_of_ray_pod_in_the_deployment_namespace_only():
    spec = spec_of()
    monitors = pod_monitors(spec)
    head_template, (worker_template, *_) = ray_templates(spec)
    cluster = f"{spec.service_name}-abc12"
    pods = {"head": kuberay_pod(head_template, "head", cluster, "headgroup"),
            "worker": kuberay_pod(worker_template, "worker", cluster, "prefill")}
    for role, monitor in monitors.items():
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [spec.namespace]}
        selector = monitor["spec"]["selector"]["matchLabels"]
        for other, pod in pods.items():
            matches = all(pod.labels.get(k) == v for k, v in selector.items())
            assert matches == (other == role), (role, other)
    # Another RayService's pods are not scraped as this one's.
    other_service = kuberay_pod({"metadata": {"labels": {"raypd.io/ray-service": "other"}}},
                                "worker", "other-x", "g")
    selector = monitors["worker"]["spec"]["selector"]["matchLabels"]
    assert not all(other_service.labels.get(k) == v for k, v in selector.items())


def test_the_head_tells_rays_dashboard_where_prometheus_and_grafana_are():
    head_template, _ = ray_templates(spec_of())
    env = {e["name"]: e.get("value") for c in head_template["spec"]["containers"] for e in c["env"]}
    assert env["RAY_PROMETHEUS_HOST"] == "http://raypd-prometheus.monitoring.svc.cluster.local:9090"
    assert env["RAY_GRAFANA_HOST"] == "http://raypd-grafana.monitoring.svc.cluster.local"


def test_disabled_the_ray_pods_are_as_before_issue_18():
    head_template, workers = ray_templates(spec_of(OFF))
    assert port_names(head_template) == {"gcs", "dashboard", "serve"}
    assert all(not port_names(template) for template in workers)
    env = {e["name"] for c in head_template["spec"]["containers"] for e in c["env"]}
    assert not env & {"RAY_PROMETHEUS_HOST", "RAY_GRAFANA_HOST", "RAY_GRAFANA_IFRAME_HOST"}


# ---- chart values ----

def test_kube_prometheus_stack_values_use_keys_the_chart_has():
    values = kube_prometheus_stack_values(spec_of())
    # The Grafana and kube-state-metrics subcharts' own keys are not in the parent's values file.
    own = {key: value for key, value in values.items() if key not in ("grafana", "kube-state-metrics")}
    assert unknown_keys(own, chart_defaults("kube-prometheus-stack-88.5.3-values.yaml")) == []
    grafana = chart_defaults("kube-prometheus-stack-88.5.3-values.yaml")["grafana"]
    assert grafana["sidecar"]["dashboards"]["label"] == values["grafana"]["sidecar"]["dashboards"]["label"]


def test_the_grafana_subchart_values_use_keys_the_grafana_chart_has():
    values = kube_prometheus_stack_values(spec_of())["grafana"]
    chart = chart_defaults("grafana-12.11.1-values.yaml")
    # storageClassName is documented (commented out) under persistence; grafana.ini is free-form;
    # fullnameOverride is read by the chart's templates/_helpers.tpl ("grafana.fullname") but has
    # no default in values.yaml.
    rest = {key: value for key, value in values.items() if key not in ("grafana.ini", "fullnameOverride")}
    rest["persistence"] = {k: v for k, v in rest["persistence"].items() if k != "storageClassName"}
    assert unknown_keys(rest, chart) == []
    assert "storageClassName" in (FIXTURES / "charts" / "grafana-12.11.1-values.yaml").read_text()


# The Prometheus CRD's patterns for these two fields (crd-prometheuses.yaml of operator v0.93.1,
# spec.retention and spec.retentionSize): a value the API server would refuse fails the release.
PROMETHEUS_RETENTION_PATTERN = (r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                r"(([0-9]+)s)?(([0-9]+)ms)?)$")
PROMETHEUS_RETENTION_SIZE_PATTERN = r"(^0|([0-9]*[.])?[0-9]+((K|M|G|T|E|P)i?)?B)$"


@pytest.mark.parametrize("block", [{}, {"prometheusStorageSize": "1Ti", "prometheusRetention": "2w"},
                                   {"prometheusStorageSize": "10Gi", "prometheusRetention": "48h"}])
def test_retention_and_its_size_fit_the_prometheus_crd(block):
    import re

    prometheus = kube_prometheus_stack_values(spec_of({"raypd:observability": block}))["prometheus"]
    assert re.search(PROMETHEUS_RETENTION_PATTERN, prometheus["prometheusSpec"]["retention"])
    assert re.search(PROMETHEUS_RETENTION_SIZE_PATTERN, prometheus["prometheusSpec"]["retentionSize"])


def test_dcgm_exporter_values_use_keys_the_chart_has():
    values = dcgm_exporter_values()
    # customMetrics is documented (commented out) in the chart's values and read by its ConfigMap.
    rest = {key: value for key, value in values.items() if key != "customMetrics"}
    assert unknown_keys(rest, chart_defaults("dcgm-exporter-4.8.2-values.yaml")) == []


def test_the_stack_runs_on_the_system_nodes_with_the_configured_volumes():
    spec = spec_of({"raypd:observability": {"prometheusStorageSize": "200Gi", "prometheusRetention": "30d",
                                            "grafanaStorageSize": "5Gi"}})
    values = kube_prometheus_stack_values(spec)
    prometheus = values["prometheus"]["prometheusSpec"]
    for placed in (prometheus, values["alertmanager"]["alertmanagerSpec"], values["prometheusOperator"],
                   values["grafana"], values["kube-state-metrics"]):
        assert placed["nodeSelector"] == defaults.SYSTEM_LABELS
    claim = prometheus["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "200Gi"
    assert claim["storageClassName"] == names.STORAGE_CLASS
    assert prometheus["retention"] == "30d"
    assert prometheus["retentionSize"] == "170GiB"  # Prometheus deletes before the volume fills
    assert values["grafana"]["persistence"]["size"] == "5Gi"
    assert values["grafana"]["persistence"]["enabled"] is True


def test_prometheus_takes_raypds_monitors_and_grafana_its_dashboards():
    values = kube_prometheus_stack_values(spec_of())
    prometheus = values["prometheus"]["prometheusSpec"]
    assert prometheus["podMonitorSelectorNilUsesHelmValues"] is False
    assert prometheus["ruleSelectorNilUsesHelmValues"] is False
    assert values["grafana"]["sidecar"]["dashboards"] == {
        "enabled": True, "label": "grafana_dashboard", "labelValue": "1", "searchNamespace": ["monitoring"]}
    assert values["crds"] == {"enabled": False}  # Pulumi applies them


def test_dcgm_exporter_exports_the_profiling_fields_on_gpu_nodes_only():
    values = dcgm_exporter_values()
    fields = [line.split(",")[0] for line in values["customMetrics"].splitlines()
              if line and not line.startswith("#")]
    assert {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"} <= set(fields)
    assert len(fields) == len(set(fields))
    for line in values["customMetrics"].splitlines():
        if line and not line.startswith("#"):
            assert line.split(", ")[1] in ("gauge", "counter"), line
    assert values["nodeSelector"] == defaults.GPU_ROLE_LABEL
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["tolerations"]


# ---- who reaches the metrics ports ----

def test_prometheus_reaches_every_ray_metrics_port_and_a_random_pod_none():
    policies = render_network_policies(defaults.NAMESPACE, defaults.SERVICE_NAME,
                                       api_server_cidrs=["10.0.192.20/32"],
                                       metrics_peers=prometheus_peers())
    random_pod = Pod("default", {"app.kubernetes.io/name": "prometheus"})
    for port in (defaults.RAY_METRICS_PORT, defaults.RAY_AUTOSCALER_METRICS_PORT,
                 defaults.RAY_DASHBOARD_METRICS_PORT):
        assert may_reach(policies, PROMETHEUS_POD, head(), port)
        assert not may_reach(policies, random_pod, head(), port)
    assert may_reach(policies, PROMETHEUS_POD, worker(), defaults.RAY_METRICS_PORT)
    for port in defaults.RAY_HEAD_CONTROL_PORTS + (defaults.SERVE_PORT,):
        assert not may_reach(policies, PROMETHEUS_POD, head(), port)


# ---- the config block ----

@pytest.mark.parametrize(("block", "field"), [
    ({"prometheusStorageSize": "50G"}, "raypd:observability.prometheusStorageSize"),
    ({"prometheusStorageSize": "5Gi"}, "raypd:observability.prometheusStorageSize"),
    ({"grafanaStorageSize": "20Ti"}, "raypd:observability.grafanaStorageSize"),
    ({"prometheusRetention": "forever"}, "raypd:observability.prometheusRetention"),
    ({"enabled": "maybe"}, "raypd:observability.enabled"),
    ({"retention": "15d"}, "raypd:observability.retention"),
])
def test_a_bad_observability_setting_names_its_key(block, field):
    with pytest.raises(SpecError) as caught:
        spec_of({"raypd:observability": block})
    assert [error.field for error in caught.value.errors] == [field]


def test_the_defaults_are_the_documented_ones_and_leave_no_config_key():
    spec = spec_of()
    assert spec.observability.enabled is True
    assert (spec.observability.prometheus_storage_size, spec.observability.prometheus_retention,
            spec.observability.grafana_storage_size) == ("50Gi", "15d", "10Gi")
    assert "raypd:observability" not in spec.public_config()
    assert spec_of(OFF).public_config()["raypd:observability"]["enabled"] is False


def test_kube_state_metrics_exports_every_node_and_pod_label_the_rules_and_panels_join_on():
    """kube_node_labels and kube_pod_labels carry only allow-listed labels (and kube_pod_labels
    nothing at all without a pods= entry): every label_* the rules and panels read on either must
    be in the list of its kind."""
    from components.render.observability_dashboards import dashboards

    spec = spec_of({})
    allowlist = kube_prometheus_stack_values(spec)["kube-state-metrics"]["metricLabelsAllowlist"]
    exported = {entry.split("=", 1)[0]: {"label_" + re.sub(r"[^a-z0-9]", "_", label)
                                         for label in entry.split("=", 1)[1].strip("[]").split(",")}
                for entry in allowlist}
    assert set(exported) == {"nodes", "pods"}
    # kube-state-metrics turns label role into label_role, raypd.io/phase into label_raypd_io_phase.
    promql = json.dumps([prometheus_rule_groups(spec), dashboards(spec)])
    for kind, metric in (("nodes", "kube_node_labels"), ("pods", "kube_pod_labels")):
        used = {label for selector in re.findall(metric + r"\{([^}]*)\}", promql)
                for label in re.findall(r"(label_[a-z0-9_]+)=", selector)}
        used |= {label for group in re.findall(r"by \(([^)]*)\) \(" + metric, promql)
                 for label in re.findall(r"label_[a-z0-9_]+", group)}
        assert used and used <= exported[kind], (kind, used, exported[kind])
