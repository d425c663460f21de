"""The metrics stack's Pulumi component: thin wiring of components.render.observability.

`Observability` (raypd:observability:Observability) creates, in this order:

- the EBS CSI driver (EKS add-on, its IAM role through IRSA with AWS's managed policy) and a gp3
  StorageClass: EKS clusters have no volume provisioner of their own, and Prometheus's and
  Grafana's PersistentVolumeClaims would stay Pending without one (volumes bind where their pod
  first lands: WaitForFirstConsumer);
- then the `monitoring` namespace, at Pod Security `privileged`: node-exporter reads the host's
  /proc and /sys with hostNetwork and hostPID, and dcgm-exporter needs CAP_SYS_ADMIN for the
  profiling fields (its chart's securityContext); neither fits baseline. It depends on the driver
  and the class for the way out: Pulumi deletes in reverse order, so when observability is turned
  off (or the stack destroyed) the charts go first, then the namespace with the volumes' claims
  (pulumi-kubernetes waits until a namespace is gone), and only then the driver, which is what
  detaches and deletes their EBS volumes. Removed together, the driver could go first and leave
  the volumes in EC2, billed, with nothing left to delete them;
- the Prometheus Operator's CRDs, applied by Pulumi from the operator version the chart runs (the
  releases skip CRDs, as KubeRay's and Envoy Gateway's do: components.stack.addons), then the
  kube-prometheus-stack and dcgm-exporter releases;
- the two PodMonitors, the PrometheusRule (components.render.observability_rules) and one ConfigMap per
  Grafana dashboard (components.render.observability_dashboards), which Grafana's sidecar loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import observability_names as names
from components.render.model_access import irsa_trust_policy
from components.render.network_policy import pod_security_labels
from components.render.observability import (
    crd_urls,
    dcgm_exporter_values,
    kube_prometheus_stack_values,
    pod_monitors,
    prometheus_rule,
)
from components.stack.addons import RELEASE_TIMEOUT_SECONDS, force_crd_ownership

EBS_CSI_ADDON = "aws-ebs-csi-driver"
# The add-on's controller ServiceAccount (EKS user guide, "Amazon EBS CSI driver", IAM role).
EBS_CSI_NAMESPACE = "kube-system"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_POLICY = "arn:{partition}:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
MONITORING_POD_SECURITY = "privileged"


def storage_class_manifest(zone: str) -> dict[str, Any]:
    """gp3, encrypted, bound where the pod lands and only in `zone`, the system nodes' one
    (components.plan.zones.system_zone): an EBS volume never leaves its zone, so a volume anywhere
    else would strand its pod. The EBS CSI driver reports and picks zones under the well-known
    topology.kubernetes.io/zone key (aws-ebs-csi-driver pkg/driver/node.go NodeGetInfo,
    controller.go pickAvailabilityZone). A StorageClass cannot change: a new zone replaces it
    (pulumi-kubernetes deletes a named object first), which volumes already made do not notice."""
    return {
        "metadata": {"name": names.STORAGE_CLASS, "labels": {"app.kubernetes.io/part-of": "raypd"}},
        "provisioner": "ebs.csi.aws.com",
        "parameters": {"type": "gp3", "encrypted": "true"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": defaults.ZONE_LABEL, "values": [zone]}]}],
    }


def dashboard_config_map_name(file_name: str) -> str:
    stem = file_name.removesuffix(".json").lower().replace("_", "-").replace(".", "-")
    return f"raypd-dashboard-{stem}"[:63].rstrip("-")


@dataclass(frozen=True)
class ObservabilityArgs:
    spec: DeploymentSpec
    cluster_name: pulumi.Input[str]
    partition: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    tags: dict[str, str]
    rule_groups: tuple[dict[str, Any], ...]
    dashboards: tuple[tuple[str, dict[str, Any]], ...]  # (file name, dashboard JSON model)
    # The system nodes' zone: Prometheus's and Grafana's volumes are created there only.
    volume_zone: str
    # What the charts need first (a node to run on).
    install_after: tuple[pulumi.Resource, ...] = ()


class Observability(pulumi.ComponentResource):
    """kube-prometheus-stack, dcgm-exporter and raypd's monitors; Kubernetes children take the
    provider of `opts`, the AWS ones (the CSI driver's role and add-on) the default provider."""

    grafana_url: pulumi.Output[str]
    prometheus_url: pulumi.Output[str]

    def __init__(self, name: str, args: ObservabilityArgs,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:observability:Observability", name, None, opts)
        spec = args.spec
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.install_after))
        addon = self._ebs_csi_driver(name, args)
        storage = storage_class_manifest(args.volume_zone)
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-storage-class", metadata=storage["metadata"],
            provisioner=storage["provisioner"], parameters=storage["parameters"],
            reclaim_policy=storage["reclaimPolicy"],
            volume_binding_mode=storage["volumeBindingMode"],
            allow_volume_expansion=storage["allowVolumeExpansion"],
            allowed_topologies=[k8s.core.v1.TopologySelectorTermArgs(match_label_expressions=[
                k8s.core.v1.TopologySelectorLabelRequirementArgs(key=r["key"], values=r["values"])
                for r in term["matchLabelExpressions"]]) for term in storage["allowedTopologies"]],
            opts=pulumi.ResourceOptions(parent=self))
        # After the driver and the class, so that it (with the claims in it) is deleted before
        # them: see the module docstring.
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=names.NAMESPACE, labels={
                "app.kubernetes.io/part-of": "raypd",
                **pod_security_labels(MONITORING_POD_SECURITY, f"v{spec.kubernetes_version}"),
            }),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[addon, storage_class]))

        crds = k8s.yaml.v2.ConfigGroup(f"{name}-crds", files=crd_urls(), opts=pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(transforms=[force_crd_ownership])))
        stack = self._releases(name, spec, child, crds, namespace, volumes=[storage_class, addon])
        self._monitors_and_dashboards(name, args, crds, namespace)

        self.grafana_url = pulumi.Output.from_input(names.grafana_url())
        self.prometheus_url = pulumi.Output.from_input(names.prometheus_url())
        self.register_outputs({"grafanaUrl": self.grafana_url, "prometheusUrl": self.prometheus_url,
                               "release": stack.name})

    def _ebs_csi_driver(self, name: str, args: ObservabilityArgs) -> aws.eks.Addon:
        """The EBS CSI driver add-on and its IRSA role (AWS's managed policy); AWS children, on
        the default provider."""
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda v: json.dumps(irsa_trust_policy(v[0], v[1], EBS_CSI_NAMESPACE,
                                                   EBS_CSI_SERVICE_ACCOUNT)))
        aws_child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-ebs-csi-role", assume_role_policy=trust, tags=args.tags,
                            opts=aws_child)
        attachment = aws.iam.RolePolicyAttachment(
            f"{name}-ebs-csi-policy", role=role.name,
            policy_arn=EBS_CSI_POLICY.format(partition=args.partition), opts=aws_child)
        return aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=args.cluster_name,
            addon_name=EBS_CSI_ADDON,
            service_account_role_arn=role.arn,
            tags=args.tags,
            opts=pulumi.ResourceOptions.merge(aws_child, pulumi.ResourceOptions(
                depends_on=[attachment, *args.install_after])))

    def _releases(self, name: str, spec: DeploymentSpec, child: pulumi.ResourceOptions,
                  crds: pulumi.Resource, namespace: pulumi.Resource,
                  volumes: list[pulumi.Resource]) -> k8s.helm.v3.Release:
        """kube-prometheus-stack (after the CRDs, the namespace and what its volumes need: the
        storage class and the CSI driver) and dcgm-exporter; returns the first."""
        stack = k8s.helm.v3.Release(
            f"{name}-kube-prometheus-stack",
            name=names.STACK_RELEASE,
            chart=defaults.KUBE_PROMETHEUS_STACK_CHART,
            version=defaults.KUBE_PROMETHEUS_STACK_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=defaults.KUBE_PROMETHEUS_STACK_REPO),
            namespace=names.NAMESPACE,
            values=kube_prometheus_stack_values(spec),
            skip_crds=True,
            atomic=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[crds, namespace, *volumes])))
        k8s.helm.v3.Release(
            f"{name}-dcgm-exporter",
            name=names.DCGM_RELEASE,
            chart=defaults.DCGM_EXPORTER_CHART,
            version=defaults.DCGM_EXPORTER_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=defaults.DCGM_EXPORTER_REPO),
            namespace=names.NAMESPACE,
            values=dcgm_exporter_values(),
            skip_crds=True,
            # Not atomic: the DaemonSet has no pod until a GPU node joins, and Helm would wait.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                depends_on=[crds, namespace])))
        return stack

    def _monitors_and_dashboards(self, name: str, args: ObservabilityArgs, crds: pulumi.Resource,
                                 namespace: pulumi.Resource) -> None:
        """The PodMonitors and the PrometheusRule (once their CRDs exist), and one ConfigMap per
        Grafana dashboard."""
        after_crds = pulumi.ResourceOptions(parent=self, depends_on=[crds, namespace])
        manifests = {f"pod-monitor-{role}": m for role, m in pod_monitors(args.spec).items()}
        manifests["rules"] = prometheus_rule(args.spec, list(args.rule_groups))
        for part, manifest in manifests.items():
            k8s.apiextensions.CustomResource(
                f"{name}-{part}", api_version=manifest["apiVersion"], kind=manifest["kind"],
                metadata=manifest["metadata"], spec=manifest["spec"], opts=after_crds)
        for file_name, model in args.dashboards:
            k8s.core.v1.ConfigMap(
                f"{name}-{dashboard_config_map_name(file_name)}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=dashboard_config_map_name(file_name), namespace=names.NAMESPACE,
                    labels={names.DASHBOARD_LABEL: names.DASHBOARD_LABEL_VALUE,
                            "app.kubernetes.io/part-of": "raypd"}),
                data={file_name: json.dumps(model, indent=2, sort_keys=True)},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]))
