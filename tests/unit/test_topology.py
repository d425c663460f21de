"""The deployment plan: how many nodes of what each spec needs, where each phase runs, the cost."""

from __future__ import annotations

import pytest

from components.config import catalogue, defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, group_for_phase, plan_deployment


def spec_of(config):
    return DeploymentSpec.from_config(config, "dev")


def plan_of(config) -> DeploymentPlan:
    return plan_deployment(spec_of(config))


HETEROGENEOUS = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}


def test_reference_is_one_shared_group_of_two_nodes():
    (group,) = plan_of({}).groups
    assert (group.name, group.instance_type, group.nodes) == ("gpu", "g6.8xlarge", 2)
    assert group.labels == {"role": "gpu-worker", "raypd.io/node-group": "gpu"}
    assert group.ray_resource is None
    assert (group.gpus_per_node, group.efa_interfaces_per_node, group.root_volume_gb) == (1, 1, 200)


def test_different_instance_types_get_pinned_groups():
    prefill, decode = plan_of(HETEROGENEOUS).groups
    assert (prefill.instance_type, prefill.nodes, prefill.efa_interfaces_per_node) == ("p5.48xlarge", 1, 32)
    assert (decode.instance_type, decode.nodes, decode.efa_interfaces_per_node) == ("g6e.48xlarge", 2, 4)
    assert decode.labels == {"role": "gpu-worker", "raypd.io/phase": "decode", "raypd.io/node-group": "decode"}
    assert (prefill.ray_resource, decode.ray_resource) == ("raypd_prefill", "raypd_decode")
    assert prefill.root_volume_gb == 800


def test_same_type_with_engines_smaller_than_a_node_gets_pinned_groups():
    plan = plan_of({"raypd:prefill": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 2},
                    "raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 2,
                                     "replicas": 3}})
    prefill, decode = plan.groups
    assert (prefill.name, prefill.nodes, prefill.ray_resource) == ("prefill", 1, "raypd_prefill")
    # 4 GPUs per node hold 2 decode replicas of TP=2; 3 replicas need 2 nodes of decode's own.
    assert (decode.name, decode.nodes, decode.ray_resource) == ("decode", 2, "raypd_decode")
    assert plan.phases["decode"].replicas_per_node == 2
    assert plan.ray_resources == {"prefill": "raypd_prefill", "decode": "raypd_decode"}


def test_same_type_with_whole_node_engines_keeps_the_shared_group():
    plan = plan_of({"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
                    "raypd:decode": {"instanceType": "p5.48xlarge", "tensorParallelSize": 4,
                                     "pipelineParallelSize": 2}})
    (group,) = plan.groups
    assert (group.name, group.nodes, group.ray_resource) == ("gpu", 2, None)
    assert plan.group_for("prefill") is plan.group_for("decode") is group


def test_small_replicas_pack_onto_multi_gpu_nodes():
    plan = plan_of({"raypd:mode": "colocated",
                    "raypd:colocated": {"instanceType": "g6.12xlarge", "replicas": 5,
                                        "tensorParallelSize": 2}})
    (group,) = plan.groups
    # 4 GPUs per node hold 2 replicas of TP=2; 5 replicas need 3 nodes.
    assert group.nodes == 3 and group.phases == ("colocated",)
    assert plan.phases["colocated"].replicas_per_node == 2


def test_group_for_phase_finds_the_group_serving_it():
    plan = plan_of(HETEROGENEOUS)
    assert group_for_phase(plan.groups, "decode").instance_type == "g6e.48xlarge"
    assert plan.group_for("decode") is plan.groups[1]
    with pytest.raises(KeyError):
        group_for_phase(plan.groups, "colocated")
    assert plan.instance_types == ("g6e.48xlarge", "p5.48xlarge")
    assert (plan.gpus, plan.gpu_nodes) == (24, 3)


def test_hybrid_fact_comes_from_the_model_table():
    assert plan_of({}).hybrid_model  # Qwen3.5-9B
    assert not plan_of({"raypd:model": {"id": "l", "source": "meta-llama/Llama-3.1-8B"}}).hybrid_model
    assert not plan_of({"raypd:model": {"id": "x", "source": "example/unknown"}}).hybrid_model


def test_plan_is_frozen():
    plan = plan_of({})
    with pytest.raises(AttributeError):
        plan.groups = ()  # type: ignore[misc]


def test_cost_adds_nodes_control_plane_nat_and_the_gcs_store():
    cost = plan_of({}).cost
    expected = (2 * catalogue.CATALOGUE["g6.8xlarge"].usd_per_hour
                + catalogue.CATALOGUE["m7i.xlarge"].usd_per_hour
                + catalogue.EKS_CONTROL_PLANE_USD_PER_HOUR + catalogue.NAT_GATEWAY_USD_PER_HOUR
                # GCS fault tolerance's ElastiCache, on by default for a disaggregated stack (issue 31)
                + defaults.GCS_CACHE_NODES * catalogue.CACHE_NODE_USD_PER_HOUR["cache.t4g.small"])
    assert cost.usd_per_hour == pytest.approx(expected)
    assert cost.unpriced == ()
    without_store = plan_of({"raypd:faultTolerance": {"gcs": "off"}}).cost
    assert without_store.usd_per_hour == pytest.approx(
        expected - defaults.GCS_CACHE_NODES * catalogue.CACHE_NODE_USD_PER_HOUR["cache.t4g.small"])


def test_cost_lists_instance_types_without_a_price():
    spec = spec_of({"raypd:decode": {"instanceType": "p5e.48xlarge"},
                    "raypd:prefill": {"instanceType": "p5e.48xlarge"}})
    assert plan_deployment(spec).cost.unpriced == ("p5e.48xlarge",)
    assert any("no public on-demand price" in w for w in spec.warnings)
