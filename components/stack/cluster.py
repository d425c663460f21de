"""The EKS cluster, the node IAM role, the system node group and the Kubernetes provider.

Mirrors the reference cluster: API authentication (access entries, no aws-auth ConfigMap), an OIDC
provider, public + private API endpoint, nodes only in private subnets, and the managed add-ons
vpc-cni, kube-proxy and coredns. Locked down beyond the reference: the public endpoint answers only
`raypd:apiAccessCidrs` (the nodes reach the API through the private endpoint, which stays on, so
they need no entry there), the api, audit and authenticator logs go to CloudWatch Logs, and the
upgrade policy is explicit (STANDARD while the version is in standard support: EKS's API default,
EXTENDED, would bill the cluster for extended support once the version leaves standard support).

pulumi-eks (4.x) creates vpc-cni and kube-proxy as managed add-ons
with the cluster, but skips the managed coredns add-on when there is no default node group, because
created before any node exists it sits DEGRADED until a 20-minute timeout (pulumi/pulumi-eks#1819).
So coredns is added here once the system node group exists; it adopts the self-managed coredns
that EKS bootstraps meanwhile. Its version is resolved from the cluster's Kubernetes version the way
pulumi-eks resolves its own add-ons (nodejs/eks/cluster/cluster.ts: `aws.eks.getAddonVersion`,
`mostRecent: true`), so a Kubernetes upgrade upgrades CoreDNS with it instead of leaving the
version the cluster was created with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.config import defaults

# EKS-optimised AL2023 for the CPU-only system nodes (the GPU groups use the NVIDIA variant).
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
# The AWS managed policies every EKS worker node role needs.
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
)


def aws_partition(region: str) -> str:
    """ARN partition of a region: policy ARNs differ in GovCloud, China and the ISO regions."""
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-isob-"):
        return "aws-iso-b"
    if region.startswith("us-iso-"):
        return "aws-iso"
    return "aws"


def node_policy_arns(region: str) -> list[str]:
    partition = aws_partition(region)
    return [f"arn:{partition}:iam::aws:policy/{policy}" for policy in NODE_POLICIES]


# EKS's managed access policy equal to Kubernetes' cluster-admin ClusterRole.
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


def admin_access_entries(region: str, role_arns: Sequence[str]) -> dict[str, eks.AccessEntryArgs]:
    """One EKS access entry per admin role, with cluster-admin on the whole cluster.

    Keyed by a digest of the ARN, not its place in the list: adding or removing one role never
    replaces another's entry. The cluster uses authentication mode API, where access entries (not
    the aws-auth ConfigMap) decide who may call the Kubernetes API.
    """
    policy = f"arn:{aws_partition(region)}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"
    return {
        f"admin-{hashlib.sha256(arn.encode()).hexdigest()[:10]}": eks.AccessEntryArgs(
            principal_arn=arn,
            type=eks.AccessEntryType.STANDARD,
            access_policies={"cluster-admin": eks.AccessPolicyAssociationArgs(
                policy_arn=policy,
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            )},
        )
        for arn in role_arns
    }


def node_assume_role_policy() -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }],
    })


@dataclass(frozen=True)
class SystemNodesArgs:
    instance_type: str
    count: int
    labels: dict[str, str]
    # The Ray head runs the multi-GB serving image here (see defaults.SYSTEM_ROOT_VOLUME_GB).
    root_volume_gb: int = defaults.SYSTEM_ROOT_VOLUME_GB


@dataclass(frozen=True)
class ClusterArgs:
    cluster_name: str
    kubernetes_version: str
    region: str
    vpc_id: pulumi.Input[str]
    public_subnet_ids: pulumi.Input[Sequence[str]]
    private_subnet_ids: pulumi.Input[Sequence[str]]
    # The private subnet of the system zone (components.plan.zones.system_zone), published once its
    # NAT route exists: where the system nodes start.
    system_subnet_id: pulumi.Input[str]
    system_nodes: SystemNodesArgs
    tags: dict[str, str] = field(default_factory=dict)
    # IAM roles that get cluster-admin (raypd:adminRoleArns); the deploying identity has it anyway.
    admin_role_arns: tuple[str, ...] = ()
    # Who may reach the public API endpoint (raypd:apiAccessCidrs).
    api_access_cidrs: tuple[str, ...] = defaults.API_ACCESS_CIDRS
    # EKS upgradePolicy.supportType (components.config.spec.eks_support_type).
    support_type: str = defaults.SUPPORT_STANDARD
    log_types: tuple[str, ...] = defaults.CONTROL_PLANE_LOG_TYPES


def control_plane_eni_description(cluster_name: str) -> str:
    """How EKS describes the cross-account ENIs it puts in a cluster's subnets (the source of the
    API server's connections to pods: service/pod proxy, webhooks), as EC2 lists them."""
    return f"Amazon EKS {cluster_name}"


def control_plane_cidrs(private_ips: Sequence[Sequence[str]]) -> list[str]:
    """One /32 per address of the control plane's ENIs, sorted and each once (NetworkPolicy
    ipBlocks: components.render.network_policy says why not the VPC CIDR)."""
    return sorted({f"{ip}/32" for addresses in private_ips for ip in addresses})


def control_plane_cidrs_output(cluster_name: str, vpc_id: pulumi.Input[str],
                               after: pulumi.Input[Any], parent: pulumi.Resource) -> pulumi.Output[list[str]]:
    """The control plane ENIs' addresses, read (EC2 DescribeNetworkInterfaces) once the cluster
    exists (`after` resolves then) and again on every `pulumi up`, so a move is picked up."""
    invoke = pulumi.InvokeOptions(parent=parent)

    def lookup(values: list[Any]) -> pulumi.Output[list[str]]:
        found = aws.ec2.get_network_interfaces_output(filters=[
            aws.ec2.GetNetworkInterfacesFilterArgs(
                name="description", values=[control_plane_eni_description(cluster_name)]),
            aws.ec2.GetNetworkInterfacesFilterArgs(name="vpc-id", values=[values[0]]),
        ], opts=invoke)

        def addresses(ids: list[str]) -> pulumi.Output[list[str]]:
            each = [aws.ec2.get_network_interface_output(id=eni, opts=invoke).private_ips
                    for eni in sorted(ids)]
            return pulumi.Output.all(*each).apply(control_plane_cidrs)

        return found.ids.apply(addresses)

    # `after` (the kubeconfig) only orders the look-up; its secretness must not spread to the
    # addresses, which are not secret and must show in previews.
    ready = pulumi.Output.unsecret(pulumi.Output.from_input(after).apply(lambda _: True))
    return pulumi.Output.all(vpc_id, ready).apply(lookup)


class Cluster(pulumi.ComponentResource):
    eks_cluster: eks.Cluster
    kubeconfig_json: pulumi.Output[str]
    # The API server's source addresses inside the VPC (control_plane_cidrs_output).
    control_plane_cidrs: pulumi.Output[list[str]]
    node_role_arn: pulumi.Output[str]
    # IRSA: the cluster's IAM OIDC provider, for pod roles (components.render.model_access).
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    system_node_group: eks.ManagedNodeGroup
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:cluster:Cluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.eks_cluster = _eks_cluster(f"{name}-eks", args, child)
        self.node_role_arn = _node_role(name, args, child)
        self.system_node_group = self._system_node_group(name, args, child)
        self._coredns(name, args)

        self.kubeconfig_json = self.eks_cluster.kubeconfig_json
        self.control_plane_cidrs = control_plane_cidrs_output(
            args.cluster_name, args.vpc_id, self.kubeconfig_json, parent=self)
        self.oidc_provider_arn = self.eks_cluster.oidc_provider_arn
        self.oidc_issuer = self.eks_cluster.oidc_issuer
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig_json,
            opts=child,
        )
        self.register_outputs({
            "clusterName": args.cluster_name,
            "nodeRoleArn": self.node_role_arn,
        })

    def _system_node_group(self, name: str, args: ClusterArgs,
                           child: pulumi.ResourceOptions) -> eks.ManagedNodeGroup:
        """The CPU nodes for the KubeRay operator, the Ray head, the add-ons' controllers and the
        metrics stack, in ONE zone: Prometheus's and Grafana's EBS volumes live in one zone, and a
        group spread over two could come out of a roll with every node in the other one
        (components.plan.zones.system_zone). EKS rolls a one-subnet group within its subnet."""
        system = args.system_nodes
        return eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=self.eks_cluster,
            node_role_arn=self.node_role_arn,
            instance_types=[system.instance_type],
            ami_type=SYSTEM_AMI_TYPE,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.count, max_size=system.count, desired_size=system.count
            ),
            labels=dict(system.labels),
            disk_size=system.root_volume_gb,
            subnet_ids=[args.system_subnet_id],
            enable_imd_sv2=True,
            tags=args.tags,
            opts=child,
        )

    def _coredns(self, name: str, args: ClusterArgs) -> aws.eks.Addon:
        """The managed coredns add-on, once the system nodes exist (see the module docstring),
        at the newest version for the cluster's Kubernetes version."""
        coredns_version = aws.eks.get_addon_version_output(
            addon_name="coredns", kubernetes_version=args.kubernetes_version, most_recent=True,
            opts=pulumi.InvokeOptions(parent=self),
        ).version
        return aws.eks.Addon(
            f"{name}-coredns",
            cluster_name=args.cluster_name,
            addon_name="coredns",
            addon_version=coredns_version,
            # Adopt the self-managed coredns EKS installed at cluster creation.
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group]),
        )


def _eks_cluster(name: str, args: ClusterArgs, child: pulumi.ResourceOptions) -> eks.Cluster:
    """The control plane as the module docstring describes it; no node group of its own."""
    return eks.Cluster(
        name,
        name=args.cluster_name,
        version=args.kubernetes_version,
        vpc_id=args.vpc_id,
        public_subnet_ids=args.public_subnet_ids,
        private_subnet_ids=args.private_subnet_ids,
        node_associate_public_ip_address=False,
        # Nodes and in-VPC clients use the private endpoint; the public one only answers the
        # listed ranges (where pulumi up, the web app and kubectl run).
        endpoint_private_access=True,
        endpoint_public_access=True,
        public_access_cidrs=list(args.api_access_cidrs),
        enabled_cluster_log_types=list(args.log_types),
        upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=args.support_type),
        authentication_mode=eks.AuthenticationMode.API,
        access_entries=admin_access_entries(args.region, args.admin_role_arns) or None,
        create_oidc_provider=True,
        skip_default_node_group=True,
        kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(enabled=True),
        # The VPC CNI add-on's network-policy agent enforces the NetworkPolicies
        # (components.render.network_policy); off, they would be stored and ignored. pulumi-eks
        # writes it into the add-on's configuration values as enableNetworkPolicy: "true"
        # (nodejs/eks/addons/cni-addon.ts, mergeConfigurationValues); on a running cluster
        # the add-on is updated in place (the aws-node daemonset rolls, pods keep running).
        vpc_cni_options=eks.VpcCniOptionsArgs(enable_network_policy=True),
        # Added by Cluster._coredns, after the system nodes (see the module docstring).
        coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
        tags=args.tags,
        opts=child,
    )


def _node_role(name: str, args: ClusterArgs, child: pulumi.ResourceOptions) -> pulumi.Output[str]:
    """The nodes' IAM role with the worker policies; its ARN, published only once the policies
    are attached: a node without them never joins."""
    role = aws.iam.Role(
        f"{name}-node-role",
        assume_role_policy=node_assume_role_policy(),
        tags=args.tags,
        opts=child,
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            f"{name}-node-{policy.rsplit('/', 1)[1]}",
            role=role.name,
            policy_arn=policy,
            opts=child,
        )
        for policy in node_policy_arns(args.region)
    ]
    return pulumi.Output.all(role.arn, *[a.id for a in attachments]).apply(
        lambda values: values[0]
    )
