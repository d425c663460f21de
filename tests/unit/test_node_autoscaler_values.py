"""The node autoscaler's pure values (components.render.node_autoscaler) and the node groups'
size limits (components.plan.scaling_bounds): the parts the mock-runtime tests
(tests/pulumi/test_node_autoscaler.py) cannot reach with the stacks they plan."""

from __future__ import annotations

import pytest

from components.config.spec import DeploymentSpec
from components.plan.scaling_bounds import NodeBounds, group_node_bounds
from components.plan.topology import plan_deployment
from components.render.node_autoscaler import (
    TEMPLATE_TAINT_PREFIX,
    accelerator_label,
    asg_identity_tags,
    extended_resources,
    image_tag,
    node_template_tags,
    tag_resource_suffix,
)


@pytest.mark.parametrize("version, tag", [
    ("1.35", "v1.35.2"), ("1.32", "v1.32.7"),
    ("1.37", "v1.36.1"),  # newer than the table: the newest release below it
    ("1.28", "v1.29.5"),  # older than the table: its oldest
])
def test_the_autoscaler_release_follows_the_clusters_minor(version, tag):
    assert image_tag(version) == tag


def test_a_taint_becomes_the_tag_format_upstream_parses():
    """cluster-autoscaler aws_manager.go `extractTaintsFromAsg`: value `<value>:<effect>`."""
    tags = node_template_tags({}, {}, [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert tags == {TEMPLATE_TAINT_PREFIX + "dedicated": "gpu:NoSchedule"}


def test_only_device_resources_become_scale_from_zero_hints():
    requests = {"cpu": "30", "memory": "118Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1"}
    assert extended_resources(requests) == {"nvidia.com/gpu": "1", "vpc.amazonaws.com/efa": "1"}


@pytest.mark.parametrize("instance_type, value", [
    ("g6.8xlarge", "nvidia-l4"), ("p5.48xlarge", "nvidia-h100"), ("g6e.48xlarge", "nvidia-l40s")])
def test_gpu_nodes_are_labelled_with_their_accelerator(instance_type, value):
    assert accelerator_label(instance_type) == {"k8s.amazonaws.com/accelerator": value}


def test_tag_resource_names_are_readable_and_distinct():
    keys = ["raypd.io/node-autoscaler", "k8s.io/cluster-autoscaler/node-template/label/role",
            "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"]
    assert [tag_resource_suffix(k) for k in keys] == [
        "raypd-io-node-autoscaler", "label-role", "resources-nvidia-com-gpu"]


@pytest.mark.parametrize("running, desired", [(None, 3), (2, 2), (1, 2), (9, 6)])
def test_the_desired_size_is_the_start_for_a_new_group_else_what_runs_within_the_limits(running, desired):
    assert NodeBounds(minimum=2, maximum=6, start=3).desired(running) == desired


def test_fixed_bounds_are_not_autoscaled():
    assert not NodeBounds(2, 2, 2).autoscaled and NodeBounds(2, 3, 2).autoscaled


def test_a_group_of_several_engines_per_node_needs_whole_nodes_at_each_bound():
    # Colocated TP 1 on 4-GPU g6.12xlarge: four engines a node; 1..9 replicas = 1..3 nodes.
    spec = DeploymentSpec.from_config(
        {"raypd:mode": "colocated", "raypd:colocated": {
            "instanceType": "g6.12xlarge", "replicas": 5,
            "autoscaling": {"minReplicas": 1, "maxReplicas": 9, "targetOngoingRequests": 8}}}, "dev")
    (group,) = plan_deployment(spec).groups
    assert group_node_bounds(group) == NodeBounds(minimum=1, maximum=3, start=2)


def test_a_phase_without_an_autoscaling_block_is_fixed_at_its_replicas():
    spec = DeploymentSpec.from_config({"raypd:decode": {"replicas": 3}}, "dev")
    (group,) = plan_deployment(spec).groups
    assert group_node_bounds(group) == NodeBounds(4, 4, 4)
    assert not group_node_bounds(group).autoscaled


def test_a_groups_asg_is_found_by_the_cluster_its_name_and_its_generation():
    labels = {"role": "gpu-worker", "raypd.io/node-group": "decode", "raypd.io/phase": "decode",
              "raypd.io/node-set": "3f9a1c0b2e"}
    assert asg_identity_tags("raypd-dev", labels) == {
        "raypd.io/node-autoscaler": "raypd-dev",
        "k8s.io/cluster-autoscaler/node-template/label/raypd.io/node-group": "decode",
        "k8s.io/cluster-autoscaler/node-template/label/raypd.io/node-set": "3f9a1c0b2e"}
