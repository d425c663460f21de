"""A stack's zones and subnets stay put: later runs keep the zones the stack was deployed to, and
subnet CIDRs follow the zone, not its place in a list.

EC2 is scripted under the mock runtime: a first deploy sees no VPC of the stack; a later run sees
the VPC with the zone tags the first one wrote, while EC2's offerings and zone order have changed.
"""

from __future__ import annotations

import ipaddress
import itertools
import logging
from typing import Any, Optional

import pulumi
import pytest

from components.plan.zones import GPU_ZONE_TAG, SECOND_ZONE_TAG, eks_usable, pick_second_zone
from components.stack.mockrun import PlanMocks, run_program
from components.stack.network import subnet_cidrs
from components.stack.program import main

SUBNET = "aws:ec2/subnet:Subnet"


class ScriptedRegion(PlanMocks):
    """Scripted EC2: instance-type offerings, the region's zones (name, id), and, for a stack
    deployed before, its VPC with the tags that run wrote."""

    def __init__(self, region: str, offerings: list[tuple[str, str]],
                 zones: list[tuple[str, str]], vpc_tags: Optional[dict[str, str]] = None):
        super().__init__(region)
        self.offerings = offerings
        self.zones = zones
        self.vpc_tags = vpc_tags
        self.vpc_queries: list[dict[str, Any]] = []

    def _offerings(self, request: dict[str, Any]) -> dict[str, Any]:
        filters = {f["name"]: f["values"] for f in request.get("filters") or []}
        pairs = [(t, z) for t, z in self.offerings
                 if t in filters.get("instance-type", []) and z in filters.get("location", [z])]
        return {"instanceTypes": [t for t, _ in pairs], "locations": [z for _, z in pairs],
                "locationTypes": ["availability-zone"] * len(pairs)}

    def call(self, args):  # type: ignore[override]
        if args.token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"id": self.region, "names": [n for n, _ in self.zones],
                    "zoneIds": [i for _, i in self.zones], "state": "available"}
        if args.token == "aws:ec2/getVpcs:getVpcs":
            self.vpc_queries.append(dict(args.args))
            return {"id": self.region, "ids": ["vpc-0old"] if self.vpc_tags is not None else []}
        if args.token == "aws:ec2/getVpc:getVpc":
            return {"id": "vpc-0old", "cidrBlock": "10.0.0.0/16", "tags": dict(self.vpc_tags or {})}
        return super().call(args)


def deploy(mock: ScriptedRegion, config: Optional[dict[str, str]] = None):
    def program():
        main()
        return dict(pulumi.runtime.get_root_resource().outputs)
    return run_program(program, project="raypd", stack="dev", region=mock.region,
                       config={"aws:region": mock.region, **(config or {})}, mock=mock)


def subnets(run) -> dict[str, dict[str, str]]:
    return {r.name: {"az": r.inputs["availabilityZone"], "cidr": r.inputs["cidrBlock"]}
            for r in run.resources if r.type == SUBNET}


def vpc_tags(run) -> dict[str, str]:
    (vpc,) = [r for r in run.resources if r.type == "aws:ec2/vpc:Vpc"]
    return vpc.inputs["tags"]


US_EAST_2 = [("us-east-2a", "use2-az1"), ("us-east-2b", "use2-az2"), ("us-east-2c", "use2-az3")]


def test_a_later_run_keeps_the_zones_and_cidrs_although_ec2_offerings_changed():
    first = deploy(ScriptedRegion("us-east-2", [("g6.8xlarge", "us-east-2b"),
                                                ("g6.8xlarge", "us-east-2c")], US_EAST_2))
    assert first.outputs["availabilityZone"].value == "us-east-2b"
    tags = vpc_tags(first)
    assert tags[GPU_ZONE_TAG] == "us-east-2b" and tags[SECOND_ZONE_TAG] == "us-east-2a"

    # Later: 2a now offers the type too (it sorts first) and the zone list comes back reordered.
    later_mock = ScriptedRegion("us-east-2", [("g6.8xlarge", z) for z in ("us-east-2a", "us-east-2b")],
                                list(reversed(US_EAST_2)), vpc_tags=tags)
    later = deploy(later_mock)
    assert later.outputs["availabilityZone"].value == "us-east-2b"
    assert subnets(later) == subnets(first)
    assert vpc_tags(later) == tags
    # The stack found its own VPC by its own tags, nobody else's.
    (query,) = later_mock.vpc_queries
    values = {f["name"]: f["values"] for f in query["filters"]}
    assert values["tag:raypd.io/stack"] == ["dev"]
    assert values["tag:raypd.io/cluster"] == ["raypd-dev"]


def test_a_zone_that_no_longer_offers_the_type_is_kept_with_a_warning(caplog):
    tags = {GPU_ZONE_TAG: "us-east-2b", SECOND_ZONE_TAG: "us-east-2a"}
    mock = ScriptedRegion("us-east-2", [("g6.8xlarge", "us-east-2c")], US_EAST_2, vpc_tags=tags)
    with caplog.at_level(logging.WARNING):
        run = deploy(mock)
    assert run.outputs["availabilityZone"].value == "us-east-2b"
    assert any("us-east-2b" in r.getMessage() and "no longer" in r.getMessage()
               for r in caplog.records)


def test_a_configured_zone_outside_the_clusters_zones_is_refused_before_anything_changes(caplog):
    # EKS accepts new cluster subnets only in the zones the cluster was created with
    # (aws/containers-roadmap#2330): moving onto a third zone would fail mid-update.
    tags = {GPU_ZONE_TAG: "us-east-2b", SECOND_ZONE_TAG: "us-east-2a"}
    mock = ScriptedRegion("us-east-2", [("g6.8xlarge", z) for z, _ in US_EAST_2], US_EAST_2,
                          vpc_tags=tags)
    with caplog.at_level(logging.ERROR), pytest.raises(pulumi.RunError, match="nothing was created"):
        deploy(mock, {"raypd:availabilityZone": "us-east-2c"})
    (message,) = [r.getMessage() for r in caplog.records if "outside the zones" in r.getMessage()]
    assert message.startswith("raypd:availabilityZone") and "us-east-2a" in message


def test_a_configured_zone_moves_the_gpu_nodes_onto_the_second_zone_on_purpose(caplog):
    tags = {GPU_ZONE_TAG: "us-east-2b", SECOND_ZONE_TAG: "us-east-2a"}
    mock = ScriptedRegion("us-east-2", [("g6.8xlarge", z) for z, _ in US_EAST_2], US_EAST_2,
                          vpc_tags=tags)
    with caplog.at_level(logging.WARNING):
        run = deploy(mock, {"raypd:availabilityZone": "us-east-2a"})
    assert run.outputs["availabilityZone"].value == "us-east-2a"
    assert {s["az"] for s in subnets(run).values()} == {"us-east-2b", "us-east-2a"}
    assert any("replace" in r.getMessage() for r in caplog.records)
    (nat,) = [r for r in run.resources if r.type == "aws:ec2/natGateway:NatGateway"]
    assert nat.delete_before_replace  # its Elastic IP cannot be held by two NAT gateways


def test_moving_the_gpu_zone_onto_the_second_zone_swaps_them_and_keeps_both_subnets():
    tags = {GPU_ZONE_TAG: "us-east-2b", SECOND_ZONE_TAG: "us-east-2a"}
    mock = ScriptedRegion("us-east-2", [("g6.8xlarge", z) for z, _ in US_EAST_2], US_EAST_2,
                          vpc_tags=tags)
    before = deploy(ScriptedRegion("us-east-2", [("g6.8xlarge", "us-east-2b")], US_EAST_2))
    after = deploy(mock, {"raypd:availabilityZone": "us-east-2a"})
    assert subnets(after) == subnets(before)


def test_second_zone_is_one_where_eks_can_place_a_control_plane():
    # us-east-1: use1-az3 is on EKS's unsupported list; here it is the name us-east-1b.
    zones = [("us-east-1a", "use1-az6"), ("us-east-1b", "use1-az3"), ("us-east-1c", "use1-az1")]
    mock = ScriptedRegion("us-east-1", [("g6.8xlarge", "us-east-1a")], zones)
    run = deploy(mock)
    assert {s["az"] for s in subnets(run).values()} == {"us-east-1a", "us-east-1c"}


def test_gpu_zone_is_never_one_eks_rejects():
    zones = [("us-east-1a", "use1-az3"), ("us-east-1b", "use1-az6"), ("us-east-1c", "use1-az1")]
    mock = ScriptedRegion("us-east-1", [("g6.8xlarge", "us-east-1a"), ("g6.8xlarge", "us-east-1c")],
                          zones)
    run = deploy(mock)
    assert run.outputs["availabilityZone"].value == "us-east-1c"


def test_pure_second_zone_rule():
    usable = eks_usable("us-east-1", [("us-east-1a", "use1-az6"), ("us-east-1b", "use1-az3"),
                                      ("us-east-1c", "use1-az1"), ("us-east-1-bos-1a", "x")])
    assert usable == ["us-east-1a", "us-east-1c"]
    assert pick_second_zone("us-east-1a", None, usable) == "us-east-1c"
    assert pick_second_zone("us-east-1a", None, ["us-east-1a"]) is None


# ---- subnet CIDRs follow the zone ----

def test_subnet_cidrs_are_keyed_to_the_zone_not_its_position():
    ab = {p.availability_zone: p for p in subnet_cidrs("10.0.0.0/16", ["us-east-2a", "us-east-2b"])}
    ba = {p.availability_zone: p for p in subnet_cidrs("10.0.0.0/16", ["us-east-2b", "us-east-2a"])}
    assert ab == ba
    # Removing a zone or adding one (in front or behind) leaves the others where they were.
    only_b = {p.availability_zone: p for p in subnet_cidrs("10.0.0.0/16", ["us-east-2b"])}
    assert only_b["us-east-2b"] == ab["us-east-2b"]
    cab = {p.availability_zone: p for p in
           subnet_cidrs("10.0.0.0/16", ["us-east-2c", "us-east-2a", "us-east-2b"])}
    assert cab["us-east-2a"] == ab["us-east-2a"] and cab["us-east-2b"] == ab["us-east-2b"]


def test_every_zone_letter_the_layout_allows_fits_without_overlap():
    zones = [f"us-east-1{letter}" for letter in "abcdef"]
    plans = subnet_cidrs("10.0.0.0/16", zones)
    blocks = [ipaddress.ip_network(c) for p in plans for c in (p.public_cidr, p.private_cidr)]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(blocks, 2))
    with pytest.raises(ValueError, match="us-east-1g"):
        subnet_cidrs("10.0.0.0/16", ["us-east-1g"])
