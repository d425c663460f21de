"""The VPC raypd's cluster lives in: public and private subnets in two AZs, one NAT gateway.

EKS wants subnets in at least two availability zones; the GPU nodes use only the first one (EFA
cannot cross AZs), so the NAT gateway sits there too: GPU nodes pull multi-GB images and checkpoints,
and a NAT in another AZ would bill cross-AZ traffic for all of it. The subnet layout is a pure
function (`subnet_cidrs`) so it can be checked without Pulumi.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Optional, Sequence

import pulumi
import pulumi_aws as aws

from components.config import defaults
from components.plan.zones import zone_letter_index

DEFAULT_VPC_CIDR = defaults.VPC_CIDR
# Private subnets are big: the VPC CNI gives every pod a VPC address and warms spare ones per node.
PRIVATE_PREFIX = 19
# Public subnets hold only the NAT gateway and load balancers.
PUBLIC_PREFIX = 22
ELB_ROLE_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_ROLE_TAG = "kubernetes.io/role/internal-elb"


@dataclass(frozen=True)
class SubnetPlan:
    availability_zone: str
    public_cidr: str
    private_cidr: str


def subnet_cidrs(vpc_cidr: str, availability_zones: Sequence[str]) -> list[SubnetPlan]:
    """One private /19 and one public /22 per AZ, each chosen by the zone's letter.

    Zone `...a` gets private block 0 and public block 0, `...b` block 1, and so on: private /19s
    from the bottom of the VPC, public /22s from its last /18 (kept out of the private range). A
    subnet's CIDR depends only on its own zone, never on where the zone sits in the list, so
    adding, removing or reordering zones leaves every existing subnet as it is. Limits: a /16
    holds 6 private /19s below the public /18, so letters a-f (no region has more regular zones
    today); a zone letter past that is refused rather than given an overlapping block.
    """
    network = ipaddress.IPv4Network(vpc_cidr)  # EKS VPCs here are IPv4
    if network.prefixlen > 16:
        raise ValueError(f"VPC CIDR {vpc_cidr} is smaller than a /16; raypd needs a /16 or larger")
    if not availability_zones or len(set(availability_zones)) != len(availability_zones):
        raise ValueError(f"need distinct availability zones, got {list(availability_zones)}")
    public_pool = list(network.subnets(new_prefix=18))[-1]
    public_blocks = list(public_pool.subnets(new_prefix=PUBLIC_PREFIX))
    # The last /18 belongs to the public pool, so private blocks must stay below it.
    usable_private = [b for b in network.subnets(new_prefix=PRIVATE_PREFIX)
                      if not b.overlaps(public_pool)]
    room = min(len(usable_private), len(public_blocks))
    plans = []
    for az in availability_zones:
        index = zone_letter_index(az)
        if index >= room:
            last = chr(ord("a") + room - 1)
            raise ValueError(
                f"{az}: the subnet layout of VPC CIDR {vpc_cidr} has blocks for zone letters "
                f"a-{last} only"
            )
        plans.append(SubnetPlan(az, str(public_blocks[index]), str(usable_private[index])))
    return plans


@dataclass(frozen=True)
class NetworkArgs:
    cluster_name: str
    # The GPU AZ first: it gets the NAT gateway and is the one GPU node groups use.
    availability_zones: tuple[str, ...]
    vpc_cidr: str = DEFAULT_VPC_CIDR
    tags: dict[str, str] = field(default_factory=dict)
    # Extra tags on the VPC only (the stack's zones, read back by later runs).
    vpc_tags: dict[str, str] = field(default_factory=dict)


def _tags(args: NetworkArgs, label: str, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
    """The stack's tags, a Name (`<cluster>-<label>`), and `extra`."""
    return {**args.tags, "Name": f"{args.cluster_name}-{label}", **(extra or {})}


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    public_subnet_ids: pulumi.Output[list[str]]
    private_subnet_ids: pulumi.Output[list[str]]
    # The same private subnets, published only once their NAT route is attached: nodes started
    # earlier could not pull images or join the cluster. One per AZ, GPU AZ first.
    node_subnet_id_by_az: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            # EKS private endpoints and node registration need VPC DNS.
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags=_tags(args, "vpc", args.vpc_tags),
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=_tags(args, "igw"), opts=child
        )
        public, private = self._subnets(name, args, vpc, gateway)
        nat = self._nat_gateway(name, args, gateway, public[args.availability_zones[0]])
        routed = self._private_routes(name, args, vpc, nat, private)

        self.vpc_id = vpc.id
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public.values()])
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private.values()])
        self.node_subnet_id_by_az = routed
        self.register_outputs({
            "vpcId": self.vpc_id,
            "publicSubnetIds": self.public_subnet_ids,
            "privateSubnetIds": self.private_subnet_ids,
        })

    def _subnets(self, name: str, args: NetworkArgs, vpc: aws.ec2.Vpc,
                 gateway: aws.ec2.InternetGateway,
                 ) -> tuple[dict[str, aws.ec2.Subnet], dict[str, aws.ec2.Subnet]]:
        """(public, private) subnets by AZ (subnet_cidrs), the public ones routed to the
        internet gateway."""
        child = pulumi.ResourceOptions(parent=self)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=_tags(args, "public"),
            opts=child,
        )
        public: dict[str, aws.ec2.Subnet] = {}
        private: dict[str, aws.ec2.Subnet] = {}
        for plan in subnet_cidrs(args.vpc_cidr, args.availability_zones):
            az = plan.availability_zone
            public[az] = aws.ec2.Subnet(
                f"{name}-public-{az}",
                vpc_id=vpc.id,
                cidr_block=plan.public_cidr,
                availability_zone=az,
                map_public_ip_on_launch=True,
                tags=_tags(args, f"public-{az}", {**cluster_tag, ELB_ROLE_TAG: "1"}),
                opts=child,
            )
            private[az] = aws.ec2.Subnet(
                f"{name}-private-{az}",
                vpc_id=vpc.id,
                cidr_block=plan.private_cidr,
                availability_zone=az,
                tags=_tags(args, f"private-{az}", {**cluster_tag, INTERNAL_ELB_ROLE_TAG: "1"}),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{az}-rta",
                subnet_id=public[az].id,
                route_table_id=public_routes.id,
                opts=child,
            )
        return public, private

    def _nat_gateway(self, name: str, args: NetworkArgs, gateway: aws.ec2.InternetGateway,
                     subnet: aws.ec2.Subnet) -> aws.ec2.NatGateway:
        """The one NAT gateway, in the GPU AZ's public subnet (see the module docstring)."""
        nat_ip = aws.ec2.Eip(f"{name}-nat-eip", domain="vpc", tags=_tags(args, "nat"),
                             opts=pulumi.ResourceOptions(parent=self))
        return aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=nat_ip.id,
            subnet_id=subnet.id,
            tags=_tags(args, "nat"),
            # The NAT needs the internet gateway attached before it can route. A zone move gives
            # it a new subnet, i.e. a replacement with the same Elastic IP, which a second NAT
            # cannot take while the first holds it (Resource.AlreadyAssociated;
            # pulumi/pulumi-aws#1483): the old NAT goes first (a few minutes without egress).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway], delete_before_replace=True),
        )

    def _private_routes(self, name: str, args: NetworkArgs, vpc: aws.ec2.Vpc,
                        nat: aws.ec2.NatGateway, private: dict[str, aws.ec2.Subnet],
                        ) -> dict[str, pulumi.Output[str]]:
        """Routes the private subnets through the NAT; returns each subnet's id, published once
        its route is attached (see node_subnet_id_by_az)."""
        child = pulumi.ResourceOptions(parent=self)
        private_routes = aws.ec2.RouteTable(
            f"{name}-private-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
            tags=_tags(args, "private"),
            opts=child,
        )
        routed: dict[str, pulumi.Output[str]] = {}
        for az, subnet in private.items():
            association = aws.ec2.RouteTableAssociation(
                f"{name}-private-{az}-rta",
                subnet_id=subnet.id,
                route_table_id=private_routes.id,
                opts=child,
            )
            # Carries the association as a dependency of whatever consumes the id.
            routed[az] = pulumi.Output.all(subnet.id, association.id).apply(lambda ids: ids[0])
        return routed
