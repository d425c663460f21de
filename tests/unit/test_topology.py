"""Node-group plan and cost estimate: how many nodes of what each spec needs."""

from __future__ import annotations

import pytest

from components import catalogue
from components.spec import DeploymentSpec
from components.topology import estimate_cost, group_for_phase, plan_gpu_groups


def spec_of(config):
    return DeploymentSpec.from_config(config, "dev")


HETEROGENEOUS = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}


def test_reference_is_one_shared_group_of_two_nodes():
    (group,) = plan_gpu_groups(spec_of({}))
    assert (group.name, group.instance_type, group.nodes) == ("gpu", "g6.8xlarge", 2)
    assert group.labels == {"role": "gpu-worker"}
    assert group.ray_resource is None
    assert (group.gpus_per_node, group.efa_interfaces_per_node, group.root_volume_gb) == (1, 1, 200)


def test_different_instance_types_get_pinned_groups():
    prefill, decode = plan_gpu_groups(spec_of(HETEROGENEOUS))
    assert (prefill.instance_type, prefill.nodes, prefill.efa_interfaces_per_node) == ("p5.48xlarge", 1, 32)
    assert (decode.instance_type, decode.nodes, decode.efa_interfaces_per_node) == ("g6e.48xlarge", 2, 4)
    assert decode.labels == {"role": "gpu-worker", "raypd.io/phase": "decode"}
    assert (prefill.ray_resource, decode.ray_resource) == ("raypd_prefill", "raypd_decode")
    assert prefill.root_volume_gb == 800


def test_small_replicas_pack_onto_multi_gpu_nodes():
    spec = spec_of({"raypd:mode": "colocated",
                    "raypd:colocated": {"instanceType": "g6.12xlarge", "replicas": 5, "tensorParallelSize": 2}})
    (group,) = plan_gpu_groups(spec)
    # 4 GPUs per node hold 2 replicas of TP=2; 5 replicas need 3 nodes.
    assert group.nodes == 3 and group.phases == ("colocated",)


def test_group_for_phase_finds_the_group_serving_it():
    groups = plan_gpu_groups(spec_of(HETEROGENEOUS))
    assert group_for_phase(groups, "decode").instance_type == "g6e.48xlarge"
    with pytest.raises(KeyError):
        group_for_phase(groups, "colocated")


def test_cost_adds_nodes_control_plane_and_nat():
    cost = estimate_cost(spec_of({}))
    expected = (2 * catalogue.CATALOGUE["g6.8xlarge"].usd_per_hour
                + catalogue.CATALOGUE["m7i.xlarge"].usd_per_hour
                + catalogue.EKS_CONTROL_PLANE_USD_PER_HOUR + catalogue.NAT_GATEWAY_USD_PER_HOUR)
    assert cost.usd_per_hour == pytest.approx(expected)
    assert cost.unpriced == ()


def test_cost_lists_instance_types_without_a_price():
    spec = spec_of({"raypd:decode": {"instanceType": "p5e.48xlarge"},
                    "raypd:prefill": {"instanceType": "p5e.48xlarge"}})
    assert estimate_cost(spec).unpriced == ("p5e.48xlarge",)
    assert any("no public on-demand price" in w for w in spec.warnings)
