"""The pure decisions inside the components: subnet layout, AZ choice, node-group and chart values."""

from __future__ import annotations

import ipaddress
import itertools

import pytest

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.plan.zones import zones_offering_all
from components.stack.addons import efa_device_plugin_values, needs_efa_plugin
from components.stack.cluster import node_policy_arns
from components.stack.network import subnet_cidrs
from components.stack.node_groups import gpu_node_group_settings


def test_subnets_fit_the_vpc_without_overlapping_and_private_ones_are_larger():
    plans = subnet_cidrs("10.0.0.0/16", ["us-east-2a", "us-east-2b", "us-east-2c"])
    vpc = ipaddress.ip_network("10.0.0.0/16")
    blocks = [ipaddress.ip_network(c) for p in plans for c in (p.public_cidr, p.private_cidr)]
    assert all(block.subnet_of(vpc) for block in blocks)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(blocks, 2))
    for plan in plans:
        private, public = (ipaddress.ip_network(c) for c in (plan.private_cidr, plan.public_cidr))
        # The VPC CNI gives every pod a VPC address: nodes' subnets need the room.
        assert private.num_addresses >= 8 * public.num_addresses


def test_adding_an_az_keeps_existing_subnets_where_they_are():
    two = subnet_cidrs("10.0.0.0/16", ["us-east-2a", "us-east-2b"])
    three = subnet_cidrs("10.0.0.0/16", ["us-east-2a", "us-east-2b", "us-east-2c"])
    assert three[:2] == two


@pytest.mark.parametrize("cidr, zones", [
    ("10.0.0.0/20", ["a", "b"]),       # too small a VPC
    ("10.0.0.0/16", ["a", "a"]),       # the same AZ twice
    ("10.0.0.0/16", []),
])
def test_impossible_subnet_layouts_are_refused(cidr, zones):
    with pytest.raises(ValueError):
        subnet_cidrs(cidr, zones)


def test_zone_choice_needs_every_type_and_skips_local_zones():
    offerings = [
        ("p5.48xlarge", "us-west-2-lax-1a"), ("g6e.48xlarge", "us-west-2-lax-1a"),
        ("p5.48xlarge", "us-west-2d"), ("g6e.48xlarge", "us-west-2d"),
        ("p5.48xlarge", "us-west-2b"), ("g6e.48xlarge", "us-west-2b"),
        ("p5.48xlarge", "us-west-2a"),
    ]
    assert zones_offering_all("us-west-2", offerings, ["p5.48xlarge", "g6e.48xlarge"]) == [
        "us-west-2b", "us-west-2d"]
    assert zones_offering_all("us-west-2", offerings, ["p6-b200.48xlarge"]) == []


def test_efa_settings_only_for_efa_capable_types():
    efa_spec = DeploymentSpec.from_config({}, "dev")
    plain_spec = DeploymentSpec.from_config(
        {"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "g5.xlarge"}}, "dev"
    )
    (efa_group,) = plan_deployment(efa_spec).groups
    (plain_group,) = plan_deployment(plain_spec).groups
    efa = gpu_node_group_settings(efa_group, "us-east-2a")
    plain = gpu_node_group_settings(plain_group, "us-east-2a")
    assert efa["enable_efa_support"] is True
    assert efa["placement_group_availability_zone"] == "us-east-2a"
    assert "enable_efa_support" not in plain and "placement_group_availability_zone" not in plain
    assert needs_efa_plugin([efa_group]) and not needs_efa_plugin([plain_group])
    efa_types = efa_device_plugin_values()["supportedInstanceLabels"]["values"]
    assert "g6.8xlarge" in efa_types and "g6e.12xlarge" in efa_types and "p5.48xlarge" in efa_types
    assert "g5.xlarge" not in efa_types  # no EFA on it: the plugin's pods would wait forever


def test_node_policies_use_the_partition_of_the_region():
    assert all(arn.startswith("arn:aws-us-gov:iam::aws:policy/")
               for arn in node_policy_arns("us-gov-west-1"))
    assert all(arn.startswith("arn:aws:iam::aws:policy/") for arn in node_policy_arns("eu-west-1"))
