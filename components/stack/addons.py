"""Cluster add-ons as Helm releases: NVIDIA and EFA device plugins, and the KubeRay operator.

The values are pure functions of the node-group plan, so what each chart is told can be read in a
test. KubeRay's CRDs are applied by Pulumi from the chart version's own crds/ directory, before the
operator, rather than by Helm: Helm installs a chart's CRDs on first install only, so raising
raypd:kuberayVersion would otherwise run a new operator against the old CRDs (fields it writes
pruned by the API server). Pulumi applies them server-side and takes the fields over from Helm
(`pulumi.com/patchForce`); the release is told to skip CRDs so the two never fight. Device plugins
go where the GPU nodes are (label role=gpu-worker); without them no node advertises
`nvidia.com/gpu` or `vpc.amazonaws.com/efa` and the Ray workers never schedule. The operator and
its CRDs go on the system nodes, like the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, cast

import pulumi
import pulumi_kubernetes as k8s

from components.config import catalogue, defaults
from components.plan.topology import GpuGroupPlan

GPU_TAINT_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# Helm waits this long for the operator to become ready (image pull on a fresh node included).
RELEASE_TIMEOUT_SECONDS = 600


def _gpu_node_affinity() -> dict[str, Any]:
    (key, value), = defaults.GPU_ROLE_LABEL.items()
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
                ]
            }
        }
    }


def nvidia_device_plugin_values() -> dict[str, Any]:
    """The chart's default affinity wants Node Feature Discovery labels that EKS nodes do not
    carry, so the daemonset would schedule nowhere; target raypd's GPU label instead (a list
    value, so Helm replaces the default terms rather than merging into them)."""
    return {
        "affinity": _gpu_node_affinity(),
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, GPU_TAINT_TOLERATION],
    }


def efa_device_plugin_values() -> dict[str, Any]:
    """The chart only schedules on instance types in its built-in list, which lags new types;
    name every EFA-capable GPU type of raypd's catalogue, not only the ones the stack runs now: a
    GPU instance type change then leaves the values alone, so the plugin's pods stay on the old
    nodes while a newCluster switch still runs on them (issue 29 §1) and are already allowed on
    the new ones."""
    efa_types = sorted(t.name for t in catalogue.gpu_instance_types() if t.efa_supported)
    return {
        "nodeSelector": dict(defaults.GPU_ROLE_LABEL),
        "tolerations": [GPU_TAINT_TOLERATION],
        "supportedInstanceLabels": {"keys": [defaults.INSTANCE_TYPE_LABEL], "values": efa_types},
    }


def kuberay_operator_values() -> dict[str, Any]:
    return {"nodeSelector": dict(defaults.SYSTEM_LABELS)}


def kuberay_crd_urls(version: str) -> list[str]:
    """The CRD manifests of KubeRay chart `version` (kuberay's helm-chart/kuberay-operator/crds)."""
    release = tuple(int(part) for part in version.split("."))
    files = list(defaults.KUBERAY_CRD_FILES)
    if release >= defaults.KUBERAY_CRONJOB_CRD_SINCE:
        files.append(defaults.KUBERAY_CRONJOB_CRD_FILE)
    return [defaults.KUBERAY_CRDS_URL.format(version=version, file=name) for name in sorted(files)]


CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def force_crd_ownership(args: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
    """Transform for the CRD objects: take the fields Helm's first install wrote (server-side apply
    would otherwise stop on field-manager conflicts when the CRDs change version)."""
    if args.type_ != CRD_TYPE:
        return None
    props: dict[str, Any] = dict(cast(Mapping[str, Any], args.props))
    metadata = dict(props.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), PATCH_FORCE_ANNOTATION: "true"}
    props["metadata"] = metadata
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


def needs_efa_plugin(groups: Sequence[GpuGroupPlan]) -> bool:
    return any(g.efa_interfaces_per_node > 0 for g in groups)


@dataclass(frozen=True)
class AddonsArgs:
    gpu_groups: tuple[GpuGroupPlan, ...]
    kuberay_version: str
    # What must exist before charts install, e.g. the system node group: Helm waits for the
    # operator pod to be ready, which needs a node to run on.
    wait_for: tuple[pulumi.Resource, ...] = ()


class Addons(pulumi.ComponentResource):
    """Children inherit the Kubernetes provider from this component's `providers` option."""

    kuberay: k8s.helm.v3.Release
    kuberay_crds: k8s.yaml.v2.ConfigGroup
    device_plugins: list[k8s.helm.v3.Release]

    def __init__(self, name: str, args: AddonsArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:addons:Addons", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for))

        def release(suffix: str, chart: str, version: str, repo: str, namespace: str,
                    values: dict[str, Any], **extra: Any) -> k8s.helm.v3.Release:
            return k8s.helm.v3.Release(
                f"{name}-{suffix}",
                name=chart,
                chart=chart,
                version=version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repo),
                namespace=namespace,
                values=values,
                opts=child,
                **extra,
            )

        self.device_plugins = [
            release("nvidia-device-plugin", defaults.NVIDIA_DEVICE_PLUGIN_CHART,
                    defaults.NVIDIA_DEVICE_PLUGIN_VERSION, defaults.NVIDIA_DEVICE_PLUGIN_REPO,
                    defaults.DEVICE_PLUGIN_NAMESPACE, nvidia_device_plugin_values())
        ]
        if needs_efa_plugin(args.gpu_groups):
            self.device_plugins.append(
                release("efa-device-plugin", defaults.EFA_DEVICE_PLUGIN_CHART,
                        defaults.EFA_DEVICE_PLUGIN_VERSION, defaults.EFA_DEVICE_PLUGIN_REPO,
                        defaults.DEVICE_PLUGIN_NAMESPACE, efa_device_plugin_values())
            )
        self.kuberay_crds = k8s.yaml.v2.ConfigGroup(
            f"{name}-kuberay-crds",
            files=kuberay_crd_urls(args.kuberay_version),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(
                transforms=[force_crd_ownership],
            )),
        )
        self.kuberay = k8s.helm.v3.Release(
            f"{name}-kuberay-operator",
            name=defaults.KUBERAY_CHART,
            chart=defaults.KUBERAY_CHART,
            version=args.kuberay_version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=defaults.KUBERAY_CHART_REPO),
            namespace=defaults.KUBERAY_NAMESPACE,
            values=kuberay_operator_values(),
            # The CRDs above, of the same version, exist first (see the module docstring).
            skip_crds=True,
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[self.kuberay_crds])
            ),
            create_namespace=True,
            # Roll back a half-installed operator instead of leaving it for the next `up`.
            atomic=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
        )
        self.register_outputs({
            "kuberayRelease": self.kuberay.name,
        })
