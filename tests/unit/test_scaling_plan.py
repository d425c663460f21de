"""An autoscaled phase in the plan (issue 30): node bounds per group, the cost at the minimum and the
maximum, and the two warnings (a downscale delay shorter than a cold start; a placement group grown
past its practical size)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.spec import DeploymentSpec
from components.plan.scaling import (
    PLACEMENT_GROUP_PRACTICAL_NODES,
    plan_warnings,
    replica_cold_start_seconds,
    scaling_warnings,
)
from components.plan.topology import DeploymentPlan, plan_deployment
from components.plan.typical_durations import CHANGE_TIMES, TYPICAL

SLOW_DOWN = 1200  # seconds: longer than the cold start, so no flapping warning


def plan_of(config: dict[str, Any]) -> DeploymentPlan:
    return plan_deployment(DeploymentSpec.from_config(config, "dev"))


def scaled(low: int, high: int, **more: Any) -> dict[str, Any]:
    return {"minReplicas": low, "maxReplicas": high, "targetOngoingRequests": 8,
            "downscaleDelaySeconds": SLOW_DOWN, **more}


def test_a_shared_group_spans_both_phases_bounds() -> None:
    plan = plan_of({"raypd:prefill": {"autoscaling": scaled(1, 3)},
                    "raypd:decode": {"replicas": 2, "autoscaling": scaled(1, 4)}})
    (group,) = plan.groups
    assert (group.min_nodes, group.nodes, group.max_nodes) == (2, 3, 7)
    decode = plan.phases["decode"]
    assert (decode.min_replicas, decode.replicas, decode.max_replicas) == (1, 2, 4)
    assert (decode.min_nodes, decode.nodes, decode.max_nodes) == (1, 2, 4)
    assert plan.autoscaling


def test_engines_sharing_a_node_count_whole_nodes_at_each_bound() -> None:
    # Colocated TP 1 on a 4-GPU g6.12xlarge: four engines per node.
    plan = plan_of({"raypd:mode": "colocated",
                    "raypd:colocated": {"instanceType": "g6.12xlarge", "replicas": 5, "autoscaling": scaled(1, 9)}})
    (group,) = plan.groups
    assert (group.min_nodes, group.nodes, group.max_nodes) == (1, 2, 3)


def test_pinned_groups_each_take_their_own_phases_bounds() -> None:
    plan = plan_of({"raypd:prefill": {"instanceType": "g6e.8xlarge"},
                    "raypd:decode": {"autoscaling": scaled(1, 5)}})
    prefill, decode = plan.groups
    assert (prefill.min_nodes, prefill.nodes, prefill.max_nodes) == (1, 1, 1)
    assert (decode.min_nodes, decode.nodes, decode.max_nodes) == (1, 1, 5)


def test_without_autoscaling_every_bound_is_the_starting_count() -> None:
    plan = plan_of({"raypd:decode": {"replicas": 3}})
    (group,) = plan.groups
    assert group.min_nodes == group.nodes == group.max_nodes == 4
    assert plan.cost_at_min == plan.cost == plan.cost_at_max
    assert not plan.autoscaling
    assert scaling_warnings(plan) == []


def test_the_cost_is_priced_at_the_start_the_minimum_and_the_maximum() -> None:
    fixed, scaled_plan = plan_of({"raypd:decode": {"replicas": 2}}), plan_of(
        {"raypd:decode": {"replicas": 2, "autoscaling": scaled(1, 4)}})
    assert scaled_plan.cost == fixed.cost  # estimatedUsdPerHour keeps its meaning: the starting counts
    node = 2.0144  # g6.8xlarge, on-demand us-east-1
    assert scaled_plan.cost_at_min.usd_per_hour == pytest.approx(fixed.cost.usd_per_hour - node)
    assert scaled_plan.cost_at_max.usd_per_hour == pytest.approx(fixed.cost.usd_per_hour + 2 * node)


# ---- the warnings ----

def test_the_cold_start_is_a_node_join_plus_what_a_ray_worker_does_before_ready() -> None:
    assert replica_cold_start_seconds() == (CHANGE_TIMES["gpu-node-join"].seconds
                                            + TYPICAL["kubernetes:ray.io/v1:RayService"].seconds)
    assert replica_cold_start_seconds() > 600  # longer than Serve's default downscale delay


def test_a_downscale_delay_shorter_than_the_cold_start_warns_naming_the_key() -> None:
    (note,) = scaling_warnings(plan_of({"raypd:decode": {"autoscaling": scaled(1, 4, downscaleDelaySeconds=300)}}))
    assert note.startswith("raypd:decode.autoscaling.downscaleDelaySeconds 300 s is shorter than")
    assert "flaps" in note and str(int(replica_cold_start_seconds())) in note


def test_serves_default_downscale_delay_warns_and_says_it_is_the_default() -> None:
    block = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8}
    (note,) = scaling_warnings(plan_of({"raypd:prefill": {"autoscaling": block}}))
    assert note.startswith("raypd:prefill.autoscaling.downscaleDelaySeconds 600 s (Serve's default)")


def test_a_downscale_delay_at_least_the_cold_start_does_not_warn() -> None:
    cold = replica_cold_start_seconds()
    assert scaling_warnings(plan_of({"raypd:decode": {"autoscaling": scaled(1, 4, downscaleDelaySeconds=cold)}})) == []


def test_a_maximum_past_the_placement_groups_practical_size_warns() -> None:
    high = PLACEMENT_GROUP_PRACTICAL_NODES  # decode alone fills it; with prefill's node the group is past it
    (note,) = scaling_warnings(plan_of({"raypd:decode": {"autoscaling": scaled(1, high)}}))
    assert note.startswith("raypd:decode.autoscaling.maxReplicas: at the maximum, GPU node group gpu holds "
                           f"{high + 1} g6.8xlarge nodes in one cluster placement group")
    assert "InsufficientInstanceCapacity" in note
    assert scaling_warnings(plan_of({"raypd:decode": {"autoscaling": scaled(1, high - 1)}})) == []


def test_a_group_without_efa_has_no_placement_group_to_outgrow() -> None:
    # g6.4xlarge has no EFA interface (so no cluster placement group); UCX needs none.
    config = {"raypd:kvTransfer": {"backend": "UCX"},
              "raypd:prefill": {"instanceType": "g6.4xlarge"},
              "raypd:decode": {"instanceType": "g6.4xlarge", "autoscaling": scaled(1, 40)}}
    assert scaling_warnings(plan_of(config)) == []


def test_a_fixed_group_past_the_practical_size_is_not_this_warnings_business() -> None:
    assert scaling_warnings(plan_of({"raypd:decode": {"replicas": 30}})) == []


def test_plan_warnings_are_the_specs_and_the_plans() -> None:
    plan = plan_of({"raypd:decode": {"autoscaling": scaled(1, 4, downscaleDelaySeconds=60)}})
    warnings = plan_warnings(plan)
    assert warnings[:len(plan.spec.warnings)] == plan.spec.warnings
    assert any(note.startswith("raypd:decode.autoscaling.downscaleDelaySeconds") for note in warnings)


def test_the_web_summary_and_serve_render_show_the_plans_warnings(tmp_path) -> None:
    from serve.render import render_file
    from webui.summary import summarize

    config = {"raypd:decode": {"autoscaling": scaled(1, 4, downscaleDelaySeconds=60)}}
    assert any("downscaleDelaySeconds" in note for note in summarize(plan_of(config))["warnings"])
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text("config:\n  raypd:decode:\n    autoscaling: {minReplicas: 1, maxReplicas: 4, "
                     "targetOngoingRequests: 8, downscaleDelaySeconds: 60}\n")
    _, warnings = render_file(str(stack), None)
    assert any("downscaleDelaySeconds" in note for note in warnings)
