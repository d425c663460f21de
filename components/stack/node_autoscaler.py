"""Cluster Autoscaler on the system nodes: thin wiring of components.render.node_autoscaler.

Its IAM role (IRSA: only its ServiceAccount may assume it) with upstream's policy limited to this
cluster's GPU groups, then its Helm release, which reads the role's ARN only once the policy is
attached (an autoscaler that starts earlier fails its first AWS calls with AccessDenied). The GPU
node groups' ASG tags, which it discovers them by, are the groups' own (components.stack.node_groups).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.config import defaults
from components.render.node_autoscaler import cluster_autoscaler_iam_policy, cluster_autoscaler_values
from components.stack.addons import RELEASE_TIMEOUT_SECONDS
from components.stack.irsa import irsa_role


@dataclass(frozen=True)
class NodeAutoscalerArgs:
    cluster_name: str
    region: str
    kubernetes_version: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    tags: dict[str, str]
    # What must exist before the chart installs (the system nodes it runs on).
    wait_for: tuple[pulumi.Resource, ...] = ()


class NodeAutoscaler(pulumi.ComponentResource):
    """The Cluster Autoscaler; Kubernetes children take the provider of `opts`."""

    release: k8s.helm.v3.Release
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: NodeAutoscalerArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:cluster:NodeAutoscaler", name, None, opts)
        namespace, account = defaults.CLUSTER_AUTOSCALER_NAMESPACE, defaults.CLUSTER_AUTOSCALER_SERVICE_ACCOUNT
        self.role_arn = irsa_role(
            f"{name}-role", f"{name}-policy", oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer, namespace=namespace, service_account=account,
            policy=cluster_autoscaler_iam_policy(args.cluster_name), tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self))
        values = self.role_arn.apply(lambda arn: cluster_autoscaler_values(
            args.cluster_name, args.region, arn, args.kubernetes_version))
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=defaults.CLUSTER_AUTOSCALER_CHART,
            chart=defaults.CLUSTER_AUTOSCALER_CHART,
            version=defaults.CLUSTER_AUTOSCALER_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=defaults.CLUSTER_AUTOSCALER_CHART_REPO),
            namespace=namespace,
            values=values,
            atomic=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for)),
        )
        self.register_outputs({"roleArn": self.role_arn})
