"""The metrics stack under the mock runtime (issue 18 §1): what the program registers with
raypd:observability on (the default) and off, the charts' values and monitors as the engine
receives them, and the `observability` output."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import observability_names as names
from components.render.observability import dcgm_exporter_values, kube_prometheus_stack_values, pod_monitors
from components.render.outputs import validate_outputs
from components.stack.offline_plan import render_summary
from tests.unit.test_observability_render import schema_errors

RELEASE = "kubernetes:helm.sh/v3:Release"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
PROMETHEUS_RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
OFF = {"raypd:observability": {"enabled": False}}


@pytest.fixture(scope="module")
def disabled_plan(make_plan):
    return make_plan(OFF)


@pytest.fixture(scope="module")
def sized_plan(make_plan):
    return make_plan({"raypd:observability": {"prometheusStorageSize": "120Gi", "grafanaStorageSize": "2Gi"}})


def releases(plan) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["chart"]: r for r in plan.of_type(RELEASE)}


def in_monitoring(plan) -> list[dict[str, Any]]:
    return [r for r in plan.resources if r["name"].startswith("observability")]


def as_manifest(resource: dict[str, Any]) -> dict[str, Any]:
    return {key: resource["inputs"][key] for key in ("apiVersion", "kind", "metadata", "spec")}


def test_the_default_stack_installs_both_charts_pinned_in_the_monitoring_namespace(reference_plan):
    charts = releases(reference_plan)
    stack = charts[defaults.KUBE_PROMETHEUS_STACK_CHART]["inputs"]
    dcgm = charts[defaults.DCGM_EXPORTER_CHART]["inputs"]
    assert (stack["version"], dcgm["version"]) == ("88.5.3", "4.8.2")
    assert stack["repositoryOpts"]["repo"] == "https://prometheus-community.github.io/helm-charts"
    assert dcgm["repositoryOpts"]["repo"] == "https://nvidia.github.io/dcgm-exporter/helm-charts"
    assert stack["namespace"] == dcgm["namespace"] == "monitoring"
    assert stack["skipCrds"] is True and dcgm["skipCrds"] is True
    spec = DeploymentSpec.from_config({}, "dev")
    assert stack["values"] == kube_prometheus_stack_values(spec)
    assert dcgm["values"] == dcgm_exporter_values()


def test_the_charts_wait_for_the_operator_crds_and_the_stack_for_its_storage(reference_plan):
    charts = releases(reference_plan)
    assert "observability-crds" in charts["dcgm-exporter"]["dependsOn"]
    assert {"observability-crds", "observability-storage-class", "observability-ebs-csi",
            "observability-namespace", "cluster-system"} <= set(charts["kube-prometheus-stack"]["dependsOn"])
    (crds,) = [r for r in reference_plan.of_type("kubernetes:yaml/v2:ConfigGroup")
               if r["name"] == "observability-crds"]
    files = crds["inputs"]["files"]
    assert all("/prometheus-operator/v0.93.1/" in url for url in files)
    assert any(url.endswith("monitoring.coreos.com_podmonitors.yaml") for url in files)


def test_the_volumes_have_the_configured_sizes_on_a_gp3_class_the_ebs_driver_provisions(sized_plan):
    values = releases(sized_plan)["kube-prometheus-stack"]["inputs"]["values"]
    claim = values["prometheus"]["prometheusSpec"]["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["resources"]["requests"]["storage"] == "120Gi"
    assert values["grafana"]["persistence"]["size"] == "2Gi"
    (storage_class,) = sized_plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class["inputs"]["metadata"]["name"] == claim["storageClassName"]
    assert storage_class["inputs"]["provisioner"] == "ebs.csi.aws.com"
    (addon,) = [r for r in sized_plan.of_type("aws:eks/addon:Addon") if r["name"] == "observability-ebs-csi"]
    assert addon["inputs"]["addonName"] == "aws-ebs-csi-driver"
    assert addon["inputs"]["serviceAccountRoleArn"]  # IRSA: the driver may create volumes


def needs(plan, name: str) -> set[str]:
    """Every resource `name` depends on, directly or through others: what Pulumi creates before
    it and, when both go (raypd:observability.enabled false, or destroy), deletes after it."""
    direct = {r["name"]: set(r["dependsOn"]) for r in plan.resources}
    found: set[str] = set()
    todo = list(direct[name])
    while todo:
        item = todo.pop()
        if item not in found:
            found.add(item)
            todo += direct.get(item, ())
    return found


def test_turned_off_the_volumes_claims_go_before_the_ebs_driver_that_deletes_their_volumes(reference_plan):
    """Removal runs in reverse dependency order. The claims of Prometheus and Grafana go with the
    namespace (pulumi-kubernetes waits until it is gone); the EBS CSI driver must still run then,
    or nothing detaches and deletes their EBS volumes, which stay billed in EC2."""
    namespace = needs(reference_plan, "observability-namespace")
    assert {"observability-ebs-csi", "observability-ebs-csi-role", "observability-ebs-csi-policy",
            "observability-storage-class"} <= namespace
    in_namespace = [r["name"] for r in in_monitoring(reference_plan)
                    if r["inputs"].get("namespace") == "monitoring"
                    or (r["inputs"].get("metadata") or {}).get("namespace") == "monitoring"]
    assert len(in_namespace) >= 6  # two releases, two PodMonitors, the rule, the dashboards
    for name in in_namespace:
        assert "observability-namespace" in needs(reference_plan, name), name


@pytest.mark.parametrize("gpu_zone", ["us-east-2a", "us-east-2b"])
def test_the_system_nodes_and_the_monitoring_volumes_stay_in_one_zone(make_plan, gpu_zone):
    """gp3 volumes are zonal: with system nodes in two zones a node roll can leave Prometheus and
    Grafana on the other side of their volumes, Pending. The system node group sits in one zone,
    the stack's first by name, whichever holds the GPUs (raypd:availabilityZone may swap the two),
    and the storage class creates the volumes there only."""
    plan = make_plan({"raypd:availabilityZone": gpu_zone})
    assert plan.outputs["availabilityZone"] == gpu_zone
    (system,) = [r for r in plan.of_type("eks:index:ManagedNodeGroup") if r["name"] == "cluster-system"]
    assert len(system["inputs"]["subnetIds"]) == 1
    assert {"network-private-us-east-2a", "network-private-us-east-2a-rta"} <= set(system["dependsOn"])
    assert not any("us-east-2b" in name for name in system["dependsOn"])
    (storage_class,) = plan.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class["inputs"]["allowedTopologies"] == [{"matchLabelExpressions": [
        {"key": "topology.kubernetes.io/zone", "values": ["us-east-2a"]}]}]
    assert storage_class["inputs"]["volumeBindingMode"] == "WaitForFirstConsumer"
    # Prometheus, Grafana and Alertmanager run on the system nodes only.
    values = releases(plan)["kube-prometheus-stack"]["inputs"]["values"]
    for placed in (values["prometheus"]["prometheusSpec"], values["grafana"],
                   values["alertmanager"]["alertmanagerSpec"]):
        assert placed["nodeSelector"] == defaults.SYSTEM_LABELS
    assert plan.outputs["systemZone"] == "us-east-2a"


def test_every_pod_monitor_is_the_rendered_one_and_fits_the_crd(reference_plan):
    monitors = {r["inputs"]["metadata"]["name"]: as_manifest(r) for r in reference_plan.of_type(POD_MONITOR)}
    expected = {m["metadata"]["name"]: m for m in pod_monitors(DeploymentSpec.from_config({}, "dev")).values()}
    assert monitors == expected
    for manifest in monitors.values():
        assert not schema_errors(manifest)
    (rule,) = reference_plan.of_type(PROMETHEUS_RULE)
    assert not schema_errors(as_manifest(rule))


def test_dashboards_are_config_maps_grafanas_sidecar_loads(reference_plan):
    maps = [r for r in reference_plan.of_type("kubernetes:core/v1:ConfigMap")
            if r["inputs"]["metadata"].get("labels", {}).get(names.DASHBOARD_LABEL) == "1"]
    assert maps
    for config_map in maps:
        assert config_map["inputs"]["metadata"]["namespace"] == "monitoring"
        assert all(key.endswith(".json") for key in config_map["inputs"]["data"])


def test_the_monitoring_namespace_admits_the_node_level_exporters(reference_plan):
    (namespace,) = [r for r in reference_plan.of_type("kubernetes:core/v1:Namespace")
                    if r["inputs"]["metadata"]["name"] == "monitoring"]
    assert namespace["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"


def test_prometheus_may_scrape_the_ray_pods(reference_plan):
    policies = {r["inputs"]["metadata"]["name"]: r["inputs"]["spec"] for r in reference_plan.of_type(NETWORK_POLICY)}
    peers = [peer for rule in policies["ray-llm-ray-metrics"]["ingress"] for peer in rule["from"]]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": names.PROMETHEUS_POD_LABELS}} in peers
    head_rule = policies["ray-llm-ray-head-metrics"]["ingress"][0]
    assert {p["port"] for p in head_rule["ports"]} == {44217, 44227}


def test_the_outputs_name_grafana_and_prometheus_in_the_cluster(reference_plan):
    assert reference_plan.outputs["observability"] == {
        "grafanaUrl": "http://raypd-grafana.monitoring.svc.cluster.local",
        "prometheusUrl": "http://raypd-prometheus.monitoring.svc.cluster.local:9090",
    }
    document = dict(reference_plan.outputs, kubeconfig="[secret]")
    validate_outputs(document)


def test_the_offline_plan_says_what_it_would_install_and_that_nothing_is_collected(reference_plan):
    (note,) = [n for n in reference_plan.document["notes"] if n.startswith("observability")]
    assert "kube-prometheus-stack 88.5.3" in note and "dcgm-exporter 4.8.2" in note
    assert "nothing is collected yet" in note
    (line,) = [li for li in render_summary(reference_plan.document).splitlines()
               if li.startswith("Observability:")]
    assert "kube-prometheus-stack 88.5.3" in line and "nothing is collected yet" in line


def test_disabled_nothing_of_the_metrics_stack_exists(disabled_plan):
    assert in_monitoring(disabled_plan) == []
    assert not disabled_plan.of_type(POD_MONITOR) and not disabled_plan.of_type(PROMETHEUS_RULE)
    assert not {"kube-prometheus-stack", "dcgm-exporter"} & set(releases(disabled_plan))
    assert "observability" not in disabled_plan.outputs
    names_ = {r["inputs"]["metadata"]["name"] for r in disabled_plan.of_type(NETWORK_POLICY)}
    assert "ray-llm-ray-head-metrics" not in names_
    validate_outputs(dict(disabled_plan.outputs, kubeconfig="[secret]"))
    (note,) = [n for n in disabled_plan.document["notes"] if n.startswith("observability")]
    assert "off" in note
    assert "Observability:" not in render_summary(disabled_plan.document)
