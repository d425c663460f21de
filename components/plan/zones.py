"""Availability zones: which ones a stack uses, which ones EKS accepts, and why they never move.

Pure decisions here (tests call them without Pulumi or AWS); `components.stack.zone_lookup` asks AWS and
`components.preflight` asks boto3, and both decide with these functions (and name the setting,
`AZ_FIELD`, the same way).

Stability. A stack's zones are chosen once, on its first deploy, and written as tags on its VPC
(`raypd.io/gpu-zone`, `raypd.io/second-zone`). Every later run reads them back (EC2 DescribeVpcs
by the stack's `raypd.io/stack` and `raypd.io/cluster` tags) and keeps them, whatever EC2 now
says about offerings or the order of zones: a re-pick would replace every subnet, node group and
the cluster itself. Only an explicit `raypd:availabilityZone` moves the GPU zone (and the preview
then shows the replacements). Reading the VPC rather than the stack's own outputs through a
`pulumi.StackReference` keeps both zones (the outputs contract has only the GPU one), needs no
backend-specific stack name, and is a plain invoke whose answer is known while the program runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from components.plan.topology import DeploymentPlan

# AZ IDs (stable across accounts, unlike AZ names) where EKS cannot place cluster subnets: creating
# a cluster with a subnet there fails with UnsupportedAvailabilityZoneException. Sources: the EKS
# user guide, "VPC and subnet requirements" (network-reqs.html#network-requirements-subnets: use1-az3,
# usw1-az2, cac1-az3) as quoted by terraform-aws-modules and AWS samples, and eksctl's
# pkg/az/az.go zoneIDsToAvoid (adds cnn1-az4, eksctl issue #3916).
EKS_UNSUPPORTED_ZONE_IDS: dict[str, frozenset[str]] = {
    "us-east-1": frozenset({"use1-az3"}),
    "us-west-1": frozenset({"usw1-az2"}),
    "ca-central-1": frozenset({"cac1-az3"}),
    "cn-north-1": frozenset({"cnn1-az4"}),
}

# VPC tags that remember a stack's zones between runs (see the module docstring).
GPU_ZONE_TAG = "raypd.io/gpu-zone"
SECOND_ZONE_TAG = "raypd.io/second-zone"
STACK_TAG = "raypd.io/stack"
CLUSTER_TAG = "raypd.io/cluster"


def is_regular_zone(region: str, zone: str) -> bool:
    """`us-east-2a` yes; Local and Wavelength Zones (`us-west-2-lax-1a`) no: EKS control planes
    cannot use them, and they sort before the regular zones."""
    return re.fullmatch(re.escape(region) + r"[a-z]", zone) is not None


def zone_letter_index(zone: str) -> int:
    """0 for `...a`, 1 for `...b`: the zone's place in the subnet layout (components.stack.network).

    A regular zone's letter never changes within an account, unlike its position in a list of
    zones (which moves when zones are added, removed or filtered)."""
    letter = zone[-1:]
    if not ("a" <= letter <= "z") or not zone[-2:-1].isdigit():
        raise ValueError(f"'{zone}' is not a regular availability zone name (e.g. us-east-2a)")
    return ord(letter) - ord("a")


def eks_usable(region: str, zones: Iterable[tuple[str, str]]) -> list[str]:
    """Names of the region's regular AZs whose zone ID EKS accepts, sorted. `zones`: (name, id)."""
    excluded = EKS_UNSUPPORTED_ZONE_IDS.get(region, frozenset())
    return sorted(name for name, zone_id in zones
                  if is_regular_zone(region, name) and zone_id not in excluded)


@dataclass(frozen=True)
class PreviousZones:
    """What the stack's VPC says it was deployed to (None where a tag is missing)."""
    gpu: Optional[str]
    second: Optional[str]


def previous_zones_from_tags(tags: Optional[Mapping[str, str]]) -> Optional[PreviousZones]:
    if not tags or not tags.get(GPU_ZONE_TAG):
        return None
    return PreviousZones(gpu=tags[GPU_ZONE_TAG], second=tags.get(SECOND_ZONE_TAG) or None)


def zone_tags(gpu_zone: str, second_zone: str) -> dict[str, str]:
    return {GPU_ZONE_TAG: gpu_zone, SECOND_ZONE_TAG: second_zone}


def pick_gpu_zone(
    configured: Optional[str], previous: Optional[PreviousZones], offering: Sequence[str],
    usable: Sequence[str],
) -> Optional[str]:
    """The configured zone; else the zone the stack already uses; else the first zone (sorted)
    that offers every GPU type and where EKS can place cluster subnets. None: no such zone."""
    if configured is not None:
        return configured
    if previous is not None and previous.gpu:
        return previous.gpu
    candidates = [zone for zone in sorted(offering) if zone in set(usable)]
    return candidates[0] if candidates else None


def pick_second_zone(
    gpu_zone: str, previous: Optional[PreviousZones], usable: Sequence[str],
) -> Optional[str]:
    """The cluster's second subnet zone: the one the stack already uses when it still can (a GPU
    zone moved onto it swaps with it, so both subnets stay), else the first other EKS-usable zone."""
    remembered = [] if previous is None else [previous.second, previous.gpu]
    for zone in remembered:
        if zone and zone != gpu_zone and zone in usable:
            return zone
    others = [zone for zone in sorted(usable) if zone != gpu_zone]
    return others[0] if others else None


def system_zone(gpu_zone: str, second_zone: str) -> str:
    """The one zone of the system nodes, and so of the monitoring stack's EBS volumes: the first of
    the stack's two zones by name.

    One zone, not both: an EBS volume lives in one zone and its pod can only run there. With system
    nodes in both zones a node roll (a Kubernetes upgrade, a new AMI or instance type) can leave
    the surviving nodes in the other zone, and Prometheus and Grafana Pending (issue 29). By name,
    not the GPU zone: the set of two zones is fixed for a cluster's life, but `raypd:availabilityZone`
    may swap which one holds the GPUs; the volumes must not move with it. Usually both are the same
    zone (the GPU zone is the first zone by name that offers the GPU types)."""
    return min(gpu_zone, second_zone)


AZ_FIELD = "raypd:availabilityZone"


def gpu_instance_types(plan: DeploymentPlan) -> list[str]:
    """The GPU instance types whose offerings decide the GPU zone."""
    return list(plan.instance_types)


def zones_offering_all(
    region: str, offerings: Iterable[tuple[str, str]], needed: Iterable[str]
) -> list[str]:
    """Regular AZs (sorted) where every needed instance type is offered.

    `offerings` are (instance type, AZ) pairs as DescribeInstanceTypeOfferings returns them.
    """
    wanted = set(needed)
    offered: dict[str, set[str]] = {}
    for instance_type, zone in offerings:
        offered.setdefault(zone, set()).add(instance_type)
    return sorted(
        zone for zone, types in offered.items()
        if wanted <= types and is_regular_zone(region, zone)
    )
