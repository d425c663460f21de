"""Which availability zones a stack uses: asked of AWS when the program runs.

The decisions are pure functions of components.plan.zones (which zone offers every GPU type, which
zones EKS can use, why a stack never re-picks its zones on its own); this module asks EC2 for the
facts they decide on (instance type offerings, the region's zones, the zones the stack's VPC was
tagged with) and turns a zone that cannot work into a SpecError before anything is created. Under
the mock runtime (the offline plan, tests/pulumi) the same invokes get offline answers
(components.stack.mockrun).
"""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws

from components.config.errors import SpecError
from components.config.spec import REGION_KEY, DeploymentSpec
from components.plan import zones
from components.plan.topology import DeploymentPlan
from components.plan.zones import AZ_FIELD, gpu_instance_types, zones_offering_all


def _offerings(types: Sequence[str], zone: Optional[str]) -> list[tuple[str, str]]:
    filters = [aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(types))]
    if zone is not None:
        filters.append(aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=[zone]))
    result = aws.ec2.get_instance_type_offerings(location_type="availability-zone", filters=filters)
    return list(zip(result.instance_types or [], result.locations or [], strict=True))


def _region_zones() -> list[tuple[str, str]]:
    """(name, zone id) of the region's available zones that need no opt-in."""
    result = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(
            name="opt-in-status", values=["opt-in-not-required"]
        )],
    )
    return list(zip(result.names or [], result.zone_ids or [], strict=True))


def previous_zones(spec: DeploymentSpec) -> Optional[zones.PreviousZones]:
    """The zones this stack was deployed to, from its VPC's tags; None on a first deploy.

    EC2 DescribeVpcs by the stack's own tags (see components.plan.zones for why not a StackReference).
    Offline (the mock runtime) no VPC exists, so the plan is a first deploy's.
    """
    found = aws.ec2.get_vpcs(filters=[
        aws.ec2.GetVpcsFilterArgs(name=f"tag:{zones.STACK_TAG}", values=[spec.stack]),
        aws.ec2.GetVpcsFilterArgs(
            name=f"tag:{zones.CLUSTER_TAG}", values=[spec.effective_cluster_name]
        ),
    ])
    if not found.ids:
        return None
    return zones.previous_zones_from_tags(aws.ec2.get_vpc(id=sorted(found.ids)[0]).tags)


def resolve_zones(plan: DeploymentPlan) -> tuple[str, str]:
    """(GPU zone, second zone): the configured GPU zone, else the zones the stack already uses,
    else the first zone offering every GPU type where EKS can place cluster subnets, and the
    first other EKS-usable zone. Never re-picked on its own (see components.plan.zones).

    Asks EC2 (DescribeInstanceTypeOfferings), like the reference guide. A configured AZ that
    lacks one of the types is an error here, before anything is created, not 20 minutes into a
    node group; a remembered one that EC2 stopped listing is kept with a warning (its nodes run).
    """
    spec = plan.spec
    types = gpu_instance_types(plan)
    previous = previous_zones(spec)
    region_zones = _region_zones()
    usable = zones.eks_usable(spec.region, region_zones)
    ask_zone = spec.availability_zone or (previous.gpu if previous is not None else None)
    offering = zones_offering_all(spec.region, _offerings(types, ask_zone), types)
    gpu_zone = zones.pick_gpu_zone(spec.availability_zone, previous, offering, usable)
    if gpu_zone is None:
        raise SpecError.single(AZ_FIELD, (
            f"no availability zone of {spec.region} offers all of {', '.join(types)} where EKS "
            "can place cluster subnets; the GPU node groups must share one AZ (EFA cannot cross "
            "AZs): pick instance types offered together, or another aws:region"
        ))
    if spec.availability_zone is not None:
        if gpu_zone not in offering:
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} does not offer all of {', '.join(types)} (EC2 "
                "DescribeInstanceTypeOfferings); leave raypd:availabilityZone unset to pick one "
                "that does"
            ))
        if region_zones and gpu_zone not in usable:
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} is {dict(region_zones).get(gpu_zone, 'not an available zone')}, where "
                f"EKS cannot place cluster subnets; EKS-usable zones: {', '.join(usable)}"
            ))
        if (previous is not None and previous.gpu and previous.second
                and gpu_zone not in (previous.gpu, previous.second)):
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} is outside the zones this stack's EKS cluster was created in "
                f"({previous.gpu}, {previous.second}): EKS only accepts new cluster subnets in the "
                "zones a cluster was created with (aws/containers-roadmap#2330), so the GPU nodes "
                f"can move onto {previous.second} (the zones swap) but not elsewhere; another zone "
                "needs a new stack. Nothing was changed"
            ))
        if previous is not None and previous.gpu and previous.gpu != gpu_zone:
            pulumi.log.warn(
                f"{AZ_FIELD} moves the GPU nodes from {previous.gpu} to {gpu_zone}: the GPU node "
                "groups, their subnets and the cluster's subnets there will be replaced"
            )
    elif gpu_zone not in offering:
        pulumi.log.warn(
            f"{gpu_zone}, where this stack's GPU nodes are, is no longer listed by EC2 as offering "
            f"all of {', '.join(types)}; raypd keeps it (moving would replace the nodes and "
            f"subnets), but new nodes may fail to launch: set {AZ_FIELD} to move on purpose"
        )
    second = zones.pick_second_zone(gpu_zone, previous, usable)
    if second is None:
        raise SpecError.single(REGION_KEY, (
            f"{spec.region} has no second availability zone where EKS can place cluster subnets; "
            "EKS needs subnets in two"
        ))
    return gpu_zone, second


def resolve_gpu_zone(plan: DeploymentPlan) -> str:
    """The AZ of every GPU node (see resolve_zones)."""
    return resolve_zones(plan)[0]
