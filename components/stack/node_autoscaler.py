"""Cluster Autoscaler on the system nodes: thin wiring of components.render.node_autoscaler.

Its IAM role (IRSA: only its ServiceAccount may assume it) with upstream's policy limited to this
cluster's GPU groups, then its Helm release, which reads the role's ARN only once the policy is
attached (an autoscaler that starts earlier fails its first AWS calls with AccessDenied). The GPU
node groups' ASG tags, which it discovers them by, are the groups' own (components.stack.node_groups).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.config import defaults
from components.render.model_access import irsa_trust_policy
from components.render.node_autoscaler import cluster_autoscaler_iam_policy, cluster_autoscaler_values
from components.stack.addons import RELEASE_TIMEOUT_SECONDS


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
        trust = pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda v: json.dumps(irsa_trust_policy(v[0], v[1], namespace, account)))
        role = aws.iam.Role(f"{name}-role", assume_role_policy=trust, tags=args.tags,
                            opts=pulumi.ResourceOptions(parent=self))
        policy = aws.iam.RolePolicy(f"{name}-policy", role=role.name,
                                    policy=json.dumps(cluster_autoscaler_iam_policy(args.cluster_name)),
                                    opts=pulumi.ResourceOptions(parent=self))
        self.role_arn = pulumi.Output.all(role.arn, policy.id).apply(lambda v: v[0])
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
