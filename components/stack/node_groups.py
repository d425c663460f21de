"""One managed GPU node group per entry of the node-group plan (components.plan.topology).

`gpu_node_group_settings` decides what a group looks like (a pure function of the plan entry, its
size limits and the AZ); the component only wires it to the cluster. Every GPU group sits in ONE
private subnet of the GPU AZ: EFA traffic cannot cross AZs, and NIXL moves the KV cache over EFA.

The node autoscaler (components.render.node_autoscaler) moves a group's size between its limits;
the component tags the group's Auto Scaling group for it (discovery and scale-from-zero hints:
managed node group tags and labels never reach the ASG), and sends as desired size what the ASG
runs now (components.plan.scaling_bounds.NodeBounds.desired says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
from pulumi.output import UNKNOWN

from components.config import defaults
from components.plan.scaling_bounds import NodeBounds
from components.plan.topology import GpuGroupPlan
from components.render.node_autoscaler import (
    accelerator_label,
    asg_identity_tags,
    extended_resources,
    gpu_group_asg_tags,
    tag_resource_suffix,
)
from components.render.rayservice import worker_resources

# EKS-optimised AL2023 with the NVIDIA driver and container toolkit (the device plugin is installed
# separately as a Helm chart; the AMI does not ship it).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"


def node_group_resource_name(group: GpuGroupPlan, node_set: Optional[str] = None) -> str:
    """The Pulumi name of a group's node group. Zero-downtime stacks name each generation by its
    node set (components.render.rayservice.node_set): a new generation is a new resource, created before
    the switch, and the old one is deleted at the end of the same `pulumi up`, after it."""
    return f"{group.name}-nodes" if node_set is None else f"{group.name}-nodes-{node_set}"


def gpu_node_group_settings(group: GpuGroupPlan, availability_zone: str,
                            node_set: Optional[str] = None,
                            bounds: Optional[NodeBounds] = None) -> dict[str, Any]:
    """Keyword arguments of `eks.ManagedNodeGroup` for one plan entry (no Pulumi objects).

    Size: min and max from the phases' replica bounds (components.plan.scaling_bounds; without
    `bounds`, fixed at the plan's nodes), desired the start (the component sends what runs once
    the group exists). A Ray worker pod takes a whole node, so the group holds one node per engine.
    An autoscaled group's nodes carry the accelerator label the node autoscaler waits on.
    EFA-capable types get pulumi-eks's EFA support: a cluster placement group in the AZ and a
    launch template with one EFA interface per network card (the RayService requests them all).
    """
    bounds = bounds or NodeBounds(group.nodes, group.nodes, group.nodes)
    labels = dict(group.labels)
    if node_set is not None:
        labels[defaults.NODE_SET_LABEL] = node_set  # the new RayCluster's pods select it
    if bounds.autoscaled:
        labels.update(accelerator_label(group.instance_type))
    settings: dict[str, Any] = {
        "instance_types": [group.instance_type],
        "ami_type": GPU_AMI_TYPE,
        "labels": labels,
        "disk_size": group.root_volume_gb,
        "scaling_config": {
            "min_size": bounds.minimum,
            "max_size": bounds.maximum,
            "desired_size": bounds.start,
        },
        # Tokens required; pulumi-eks's launch template sets hop limit 2, which
        # `imds_hop_limit_one` (a transform on the group's launch template) lowers to 1.
        "enable_imd_sv2": True,
    }
    if group.efa_interfaces_per_node > 0:
        settings["enable_efa_support"] = True
        settings["placement_group_availability_zone"] = availability_zone
    return settings


LAUNCH_TEMPLATE_TYPE = "aws:ec2/launchTemplate:LaunchTemplate"
# IMDSv2's PUT response crosses one network hop: the node itself, and pods in the host network
# namespace, get a token; a pod behind the VPC CNI's veth is one hop further and gets none.
IMDS_HOP_LIMIT = 1


def imds_hop_limit_one(args: pulumi.ResourceTransformArgs) -> Optional[pulumi.ResourceTransformResult]:
    """Transform for a GPU node group's launch template: IMDSv2 only, hop limit 1.

    Why: the Ray workers run privileged (NIXL), and with pulumi-eks's hop limit 2
    (nodejs/eks/nodes/nodegroup.ts `createMNGCustomLaunchTemplate`: httpPutResponseHopLimit 2,
    fixed) any of their processes could take the node role's credentials from IMDS. What on a GPU
    node may use IMDS keeps it: the VPC CNI (aws-node, with the node role) and kube-proxy run in
    the host network, as does the EFA device plugin (aws/eks-charts stable/aws-efa-k8s-device-
    plugin/templates/daemonset.yaml, `hostNetwork: true`), and from the host network hop limit 1
    is enough; the NVIDIA device plugin asks NVML, not IMDS; an s3:// model is read with IRSA
    (components.render.model_access), whose credentials come from STS for the pod's web-identity token,
    not from IMDS. Ray, vLLM and NIXL need no instance metadata to serve. (A privileged pod
    could still break out of its container in other ways: hop limit 1 closes the direct path,
    it is not a sandbox.)

    A transform, not a launch template of raypd's own: pulumi-eks keeps building the EFA
    interfaces, the placement group and the disk; only the metadata options change, which makes
    a new launch template version, and EKS rolls the group onto it (surge nodes, then drain)
    instead of replacing it. Transforms reach the children of multi-language components such as
    pulumi-eks's ManagedNodeGroup (Pulumi docs, "Resource options: transforms").
    """
    if args.type_ != LAUNCH_TEMPLATE_TYPE:
        return None
    props: dict[str, Any] = dict(args.props)
    metadata = dict(props.get("metadataOptions") or {})
    metadata.update(httpEndpoint="enabled", httpTokens="required",
                    httpPutResponseHopLimit=IMDS_HOP_LIMIT)
    props["metadataOptions"] = metadata
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


@dataclass(frozen=True)
class GpuNodeGroupArgs:
    group: GpuGroupPlan
    availability_zone: str
    cluster: eks.Cluster
    node_role_arn: pulumi.Input[str]
    # The private subnet of the GPU AZ (with its NAT route attached).
    subnet_id: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)
    node_set: Optional[str] = None  # zero-downtime stacks: this generation (node_group_resource_name)
    # The group's size limits (components.plan.scaling_bounds.group_node_bounds); None: fixed.
    bounds: Optional[NodeBounds] = None
    cluster_name: str = ""  # the value of the node autoscaler's discovery tag


def first_autoscaling_group_name(resources: Any) -> Optional[str]:
    """The ASG of an `aws.eks.NodeGroup`'s `resources` output (a managed node group has one);
    None where there is none to read (the mock runtime resolves pulumi-eks's `nodeGroup` to None)."""
    for resource in resources or []:
        for group in resource.autoscaling_groups or []:
            return str(group.name)
    return None


class GpuNodeGroup(pulumi.ComponentResource):
    node_group: eks.ManagedNodeGroup
    asg_tags: list[aws.autoscaling.Tag]

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None
    ):
        super().__init__("raypd:cluster:GpuNodeGroup", name, None, opts)
        group = args.group
        bounds = args.bounds or NodeBounds(group.nodes, group.nodes, group.nodes)
        settings = gpu_node_group_settings(group, args.availability_zone, args.node_set, bounds)
        scaling = settings.pop("scaling_config")
        if bounds.autoscaled:
            scaling["desired_size"] = self._running_size(args, settings["labels"]).apply(bounds.desired)
        self.node_group = eks.ManagedNodeGroup(
            f"{name}-group",
            cluster=args.cluster,
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.subnet_id],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(**scaling),
            tags={**args.tags, "raypd.io/node-group": group.name},
            opts=pulumi.ResourceOptions(parent=self, transforms=[imds_hop_limit_one]),
            **settings,
        )
        self.asg_tags = self._tag_asg(name, args, settings["labels"]) if bounds.autoscaled else []
        self.register_outputs({"instanceType": group.instance_type, "nodes": group.nodes,
                               "minNodes": bounds.minimum, "maxNodes": bounds.maximum})

    def _tag_asg(self, name: str, args: GpuNodeGroupArgs, labels: dict[str, str]) -> list[aws.autoscaling.Tag]:
        """The node autoscaler's tags on the group's ASG (components.render.node_autoscaler): not
        propagated to the instances, which get their labels from EKS, not from tags."""
        asg_name = self._asg_name()
        resources = extended_resources(worker_resources(args.group)["requests"])
        return [
            aws.autoscaling.Tag(
                f"{name}-asg-{tag_resource_suffix(key)}",
                autoscaling_group_name=asg_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for key, value in sorted(gpu_group_asg_tags(args.cluster_name, labels, resources).items())
        ]

    def _asg_name(self) -> pulumi.Output[Any]:
        """The group's ASG name from pulumi-eks's `nodeGroup` output; unknown (as in a preview of a
        new group) where it cannot be read, which is the mock runtime."""
        def resources(group: Any) -> Any:
            return group.resources if group is not None else None

        def name(found: Any) -> Any:
            return first_autoscaling_group_name(found) or UNKNOWN

        return self.node_group.node_group.apply(resources).apply(name)

    def _running_size(self, args: GpuNodeGroupArgs, labels: dict[str, str]) -> pulumi.Output[Optional[int]]:
        """The desired size of this group's ASG now, found by the tags raypd put on it (discovery,
        node group, node set); None for a group that does not exist yet."""
        invoke = pulumi.InvokeOptions(parent=self)
        identity = asg_identity_tags(args.cluster_name, labels)
        # pulumi-aws names Terraform's aws_autoscaling_groups data source autoscaling.getAmiIds.
        found = aws.autoscaling.get_ami_ids_output(filters=[
            aws.autoscaling.GetAmiIdsFilterArgs(name=f"tag:{key}", values=[value])
            for key, value in identity.items()
        ], opts=invoke)

        def size(names: Optional[list[str]]) -> Any:
            if not names or len(names) != 1:
                return None
            return aws.autoscaling.get_group_output(name=names[0], opts=invoke).desired_capacity

        return found.names.apply(size)
