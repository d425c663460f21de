"""One managed GPU node group per entry of the node-group plan (components.plan.topology).

`gpu_node_group_settings` decides what a group looks like (a pure function of the plan entry and
the AZ); the component only wires it to the cluster. Every GPU group sits in ONE private subnet of
the GPU AZ: EFA traffic cannot cross AZs, and NIXL moves the KV cache over EFA.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks

from components.config import defaults
from components.plan.topology import GpuGroupPlan

# EKS-optimised AL2023 with the NVIDIA driver and container toolkit (the device plugin is installed
# separately as a Helm chart; the AMI does not ship it).
GPU_AMI_TYPE = "AL2023_x86_64_NVIDIA"


def node_group_resource_name(group: GpuGroupPlan, node_set: Optional[str] = None) -> str:
    """The Pulumi name of a group's node group. Zero-downtime stacks name each generation by its
    node set (components.render.rayservice.node_set): a new generation is a new resource, created before
    the switch, and the old one is deleted at the end of the same `pulumi up`, after it."""
    return f"{group.name}-nodes" if node_set is None else f"{group.name}-nodes-{node_set}"


def gpu_node_group_settings(group: GpuGroupPlan, availability_zone: str,
                            node_set: Optional[str] = None) -> dict[str, Any]:
    """Keyword arguments of `eks.ManagedNodeGroup` for one plan entry (no Pulumi objects).

    Fixed size (min = max = desired = nodes): a Ray worker pod takes a whole node, and the Serve
    placement groups need every node at once, so there is nothing to autoscale between.
    EFA-capable types get pulumi-eks's EFA support: a cluster placement group in the AZ and a
    launch template with one EFA interface per network card (the RayService requests them all).
    """
    labels = dict(group.labels)
    if node_set is not None:
        labels[defaults.NODE_SET_LABEL] = node_set  # the new RayCluster's pods select it
    settings: dict[str, Any] = {
        "instance_types": [group.instance_type],
        "ami_type": GPU_AMI_TYPE,
        "labels": labels,
        "disk_size": group.root_volume_gb,
        "scaling_config": {
            "min_size": group.nodes,
            "max_size": group.nodes,
            "desired_size": group.nodes,
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


class GpuNodeGroup(pulumi.ComponentResource):
    node_group: eks.ManagedNodeGroup

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: Optional[pulumi.ResourceOptions] = None
    ):
        super().__init__("raypd:cluster:GpuNodeGroup", name, None, opts)
        settings = gpu_node_group_settings(args.group, args.availability_zone, args.node_set)
        scaling = settings.pop("scaling_config")
        self.node_group = eks.ManagedNodeGroup(
            f"{name}-group",
            cluster=args.cluster,
            node_role_arn=args.node_role_arn,
            subnet_ids=[args.subnet_id],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(**scaling),
            tags={**args.tags, "raypd.io/node-group": args.group.name},
            opts=pulumi.ResourceOptions(parent=self, transforms=[imds_hop_limit_one]),
            **settings,
        )
        self.register_outputs({"instanceType": args.group.instance_type, "nodes": args.group.nodes})
