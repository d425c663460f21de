"""What a change of settings does to a running deployment (components.changes), per the rules of
KubeRay, Ray Serve, pulumi-eks and EKS that its docstring cites: downtime, extra nodes, strategies."""

from __future__ import annotations

from typing import Any

import pytest

from components.changes.assess import Kind, assess
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment


def plan(config: dict[str, Any]):
    return plan_deployment(DeploymentSpec.from_config(config, "dev"))


def assessment(old: dict[str, Any], new: dict[str, Any], zone: str = "us-east-2a"):
    return assess(plan(old), plan(new), zone)


def test_scaling_up_is_in_place_without_restart_downtime_or_a_strategy_to_choose():
    result = assessment({}, {"raypd:decode": {"replicas": 2}})
    assert result.kind == Kind.IN_PLACE
    assert not result.disruptive and result.chosen.downtime_seconds == 0
    assert any("no restart of the running engines" in e.detail for e in result.effects)
    assert not result.chosen.extra_nodes


def test_scaling_down_is_in_place_but_says_eks_picks_the_node_to_drain():
    # The reference shares one group between prefill (one engine) and decode: the node EKS
    # terminates may hold the only prefill engine, so the honest downtime is a model load.
    result = assessment({"raypd:decode": {"replicas": 2}}, {})
    assert result.kind == Kind.IN_PLACE and not result.disruptive
    (shrink,) = [e for e in result.effects if "EKS, not Ray, picks the node to drain" in e.detail]
    assert shrink.downtime_seconds > 0 and "single engine" in shrink.detail
    # Pinned groups where the phase keeps several engines: reduced capacity, no downtime.
    pinned = {"raypd:decode": {"replicas": 3}, "raypd:prefill": {"instanceType": "g6e.8xlarge"}}
    fewer = assessment(pinned, {**pinned, "raypd:decode": {"replicas": 2}})
    (shrink,) = [e for e in fewer.effects if "EKS, not Ray" in e.detail]
    assert shrink.downtime_seconds == 0 and "reduced capacity" in shrink.detail


@pytest.mark.parametrize("change", [{"raypd:model": {"maxModelLen": 8192}},
                                    {"raypd:model": {"gpuMemoryUtilization": 0.8}},
                                    {"raypd:prefill": {"replicas": 1, "tensorParallelSize": 1},
                                     "raypd:model": {"dtype": "float16"}}])
def test_engine_setting_changes_restart_the_engines_and_offer_both_strategies(change):
    result = assessment({}, change)
    assert result.kind == Kind.RESTART_ENGINES
    in_place, zero = result.choices
    assert (in_place.name, zero.name) == ("inPlace", "newCluster")
    assert in_place.downtime_seconds > 0 and not in_place.extra_nodes
    assert zero.downtime_seconds == 0
    # The zero-downtime switch needs a second set of the GPU nodes: 2 x g6.8xlarge, 32 vCPUs each.
    assert sum(line.nodes for line in zero.extra_nodes) == 2
    assert zero.extra_vcpus == {"L-DB2E81BA": 64}
    assert zero.extra_usd is not None and zero.extra_usd > 0
    assert result.chosen is in_place  # the stack's strategy (the default)


def test_a_zero_downtime_stack_chooses_the_new_cluster():
    base = {"raypd:upgradeStrategy": "newCluster"}
    result = assessment(base, {**base, "raypd:model": {"maxModelLen": 8192}})
    assert result.chosen.name == "newCluster" and result.chosen.downtime_seconds == 0


def test_an_instance_type_change_replaces_nodes_old_and_new_together_and_rebuilds():
    result = assessment({}, {"raypd:decode": {"instanceType": "g6e.8xlarge"}})
    kinds = {e.kind for e in result.effects}
    assert {Kind.NEW_RAY_CLUSTER, Kind.REPLACE_NODES} <= kinds
    in_place = result.choices[0]
    # Create-before-delete: the old shared group (2 x g6.8xlarge) runs beside the new prefill and
    # decode groups until the update ends: it is what the peak adds to the new settings' nodes.
    assert [(line.instance_type, line.nodes) for line in in_place.extra_nodes] == [("g6.8xlarge", 2)]
    assert in_place.extra_seconds > 0 and in_place.downtime_seconds > 0
    # The node groups' own time is quoted, not only the model load.
    assert all("about 10 min" in e.detail for e in result.effects if e.kind == Kind.REPLACE_NODES)


def test_the_instance_type_note_includes_the_node_group_time_not_only_the_model_load():
    result = assessment({"raypd:prefill": {"instanceType": "g6e.8xlarge"},
                         "raypd:decode": {"instanceType": "g6e.8xlarge"}},
                        {"raypd:prefill": {"instanceType": "g6.16xlarge"},
                         "raypd:decode": {"instanceType": "g6.16xlarge"}})
    (nodes,) = [e for e in result.effects if e.kind == Kind.REPLACE_NODES]
    assert "g6e.8xlarge -> g6.16xlarge" in nodes.detail and "about 10 min" in nodes.detail


def test_a_kubernetes_upgrade_is_a_full_outage_with_surge_nodes():
    result = assessment({"raypd:kubernetesVersion": "1.34"}, {})
    (roll,) = [e for e in result.effects if e.kind == Kind.ROLL_NODES]
    assert "system node" in roll.detail and "full outage" in roll.detail and "quota" in roll.detail
    assert roll.downtime_seconds > 0
    assert result.chosen.extra_nodes and not result.choices  # no strategy avoids it


@pytest.mark.parametrize("strategy", ["inPlace", "newCluster"])
def test_a_new_system_node_type_moves_the_endpoints_single_proxy_whichever_the_strategy(strategy):
    # Envoy Gateway runs one proxy pod, no disruption budget, on the system nodes; EKS drains the
    # old system group at the end of the update, after the Ray cluster switch: the endpoint is
    # down until the proxy runs on the new node (and the NLB has registered it).
    base = {"raypd:upgradeStrategy": strategy}
    bigger = {**base, "raypd:systemNodes": {"instanceType": "m7i.2xlarge"}}
    result = assessment(base, bigger)
    (system,) = [e for e in result.effects if e.subject == "raypd:systemNodes.instanceType"]
    assert "proxy" in system.detail and "load balancer has registered it" in system.detail
    assert system.downtime_seconds == 180  # endpoint-proxy-move + nlb-target-registration
    in_place, zero = result.choices
    assert result.chosen is (zero if strategy == "newCluster" else in_place)
    assert zero.name == "newCluster" and zero.downtime_seconds == system.downtime_seconds
    assert "no downtime" not in zero.summary and "about 3 min of downtime" in zero.summary
    assert in_place.downtime_seconds >= system.downtime_seconds
    # In cluster scope there is no load balancer to register the new pod: shorter, not none.
    private = {**base, "raypd:endpoint": {"scope": "cluster"}}
    in_cluster = assessment(private, {**bigger, "raypd:endpoint": {"scope": "cluster"}})
    (system,) = [e for e in in_cluster.effects if e.subject == "raypd:systemNodes.instanceType"]
    assert system.downtime_seconds == 60 and "load balancer" not in system.detail


def test_naming_the_zone_the_stack_already_runs_in_is_no_move():
    assert assessment({}, {"raypd:availabilityZone": "us-east-2a"}).kind == Kind.NO_SERVING_EFFECT
    moved = assessment({}, {"raypd:availabilityZone": "us-east-2b"})
    assert moved.kind == Kind.NEW_RAY_CLUSTER
    assert any(e.subject == "raypd:availabilityZone" and "in place" in e.detail for e in moved.effects)


@pytest.mark.parametrize("change,kind", [
    ({"raypd:kuberayVersion": "1.5.1"}, Kind.IN_PLACE),
    ({"raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/ci"]}, Kind.NO_SERVING_EFFECT),
    ({"raypd:image": "example.com/ray-llm:2"}, Kind.NEW_RAY_CLUSTER),
    ({"raypd:serviceName": "other"}, Kind.NEW_ENDPOINT),
    ({"raypd:clusterName": "other"}, Kind.REPLACE_CLUSTER),
])
def test_each_kind_of_setting_has_its_effect(change, kind):
    assert assessment({}, change).kind == kind


def test_switching_strategies_says_what_the_switch_itself_costs():
    to_zero = assessment({}, {"raypd:upgradeStrategy": "newCluster"})
    assert to_zero.chosen.name == "newCluster" and to_zero.chosen.downtime_seconds == 0
    assert to_zero.chosen.extra_nodes
    back = assessment({"raypd:upgradeStrategy": "newCluster"}, {})
    assert back.chosen.name == "inPlace" and back.chosen.downtime_seconds > 0


def test_the_json_form_names_every_strategy_with_its_price():
    data = assessment({}, {"raypd:model": {"maxModelLen": 8192}}).as_dict()
    assert data["kind"] == "engines restart"
    assert [c["name"] for c in data["choices"]] == ["inPlace", "newCluster"]
    zero = data["choices"][1]
    assert zero["extraNodes"] == [{"instanceType": "g6.8xlarge", "nodes": 2,
                                   "why": "the old Ray cluster's nodes, until the switch"}]
    assert zero["extraVcpus"] == {"L-DB2E81BA": 64} and zero["downtimeSeconds"] == 0


def test_the_docs_settings_table_is_what_the_assessment_says():
    # docs/infrastructure.md shows the table `python -m components.changes` prints: if the rules
    # change, the page must change with them (regenerate it with that command).
    from pathlib import Path

    from components.changes.docs_table import settings_table

    page = (Path(__file__).resolve().parents[2] / "docs" / "infrastructure.md").read_text()
    begin = page.index("<!-- BEGIN settings-table")
    start = page.index("\n", begin) + 1
    end = page.index("<!-- END settings-table -->")
    assert page[start:end] == settings_table()
    # Every Contract 1 key that a change can touch has a row.
    for key in ("replicas", "raypd:model", "instanceType", "availabilityZone", "kubernetesVersion",
                "systemNodes", "raypd:image", "kvTransfer", "raypd:mode", "kuberayVersion",
                "serviceName", "clusterName", "hfToken", "adminRoleArns", "upgradeStrategy",
                "raypd:endpoint"):
        assert key in page[start:end], key


@pytest.mark.parametrize("before,after", [("1.35", "1.34"), ("1.33", "1.35")])
def test_a_kubernetes_downgrade_or_a_jump_is_refused_not_previewed_as_an_upgrade(before, after):
    result = assessment({"raypd:kubernetesVersion": before}, {"raypd:kubernetesVersion": after})
    assert result.kind == Kind.REFUSED and not result.choices
    assert "fails at its first step" in result.effects[0].detail


def test_an_image_change_pulls_the_new_image_so_its_downtime_is_the_cold_start():
    from components.plan.durations import TYPICAL_SECONDS

    (cluster,) = [e for e in assessment({}, {"raypd:image": "example.com/ray-llm:2"}).effects
                  if e.kind == Kind.NEW_RAY_CLUSTER]
    assert cluster.downtime_seconds == TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]


def test_engines_of_a_phase_with_several_replicas_restart_in_batches_without_downtime():
    several = {"raypd:prefill": {"replicas": 2}, "raypd:decode": {"replicas": 2}}
    result = assessment(several, {**several, "raypd:model": {"maxModelLen": 8192}})
    (restart,) = [e for e in result.effects if e.kind == Kind.RESTART_ENGINES]
    assert restart.downtime_seconds == 0 and "in batches" in restart.detail


@pytest.mark.parametrize(("old_replicas", "new_replicas"), [(1, 2), (2, 1), (1, 3)])
def test_a_replica_scale_on_a_new_cluster_stack_stays_in_place_with_no_second_cluster(old_replicas, new_replicas):
    # The strategy is for changes that restart engines or rebuild the cluster; a replica count is
    # neither (Serve adds or removes a replica in the running cluster), whatever the stack chose.
    zero = {"raypd:upgradeStrategy": "newCluster"}
    result = assessment({**zero, "raypd:decode": {"replicas": old_replicas}},
                        {**zero, "raypd:decode": {"replicas": new_replicas}})
    assert result.kind == Kind.IN_PLACE and not result.disruptive
    assert result.chosen.name == "inPlace" and result.choices == ()
    assert not result.chosen.extra_nodes and "second Ray cluster" not in result.chosen.summary
    assert result.chosen.summary.endswith("no extra nodes")


# ---- issue 30: a phase's autoscaling block ----

AUTOSCALING = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8, "downscaleDelaySeconds": 1200}


@pytest.mark.parametrize("old,new,turned", [
    ({}, {"raypd:decode": {"autoscaling": AUTOSCALING}}, "turned on for decode"),
    ({"raypd:prefill": {"autoscaling": AUTOSCALING}}, {}, "turned off for prefill"),
])
def test_turning_autoscaling_on_or_off_builds_a_new_ray_cluster_and_says_why(old, new, turned):
    """The node autoscaler runs only on an autoscaled stack, and then every Ray worker carries its
    do-not-evict annotation: a new pod template, so KubeRay builds a new Ray cluster (a stack that
    never autoscales keeps its template as it was). Ray 2.58 would restart the engines anyway:
    get_app_code_version lists each override's autoscaling policy."""
    result = assessment(old, new)
    assert result.kind == Kind.NEW_RAY_CLUSTER and result.disruptive
    (effect,) = [e for e in result.effects if e.subject == "the Ray cluster"]
    assert f"autoscaling is {turned}" in effect.detail and "do-not-evict annotation" in effect.detail
    assert [c.name for c in result.choices] == ["inPlace", "newCluster"]
    assert result.choices[1].downtime_seconds == 0


def test_changing_the_block_is_in_place_and_says_serve_resets_to_the_starting_count():
    before = {"raypd:decode": {"autoscaling": AUTOSCALING}}
    after = {"raypd:decode": {"replicas": 2, "autoscaling": {**AUTOSCALING, "maxReplicas": 6,
                                                             "targetOngoingRequests": 4}}}
    result = assessment(before, after)
    assert result.kind == Kind.IN_PLACE and not result.disruptive
    (effect,) = [e for e in result.effects if e.subject == "raypd:decode.autoscaling"]
    assert effect.detail.startswith("decode: replicas 1 -> 2, maxReplicas 4 -> 6, targetOngoingRequests 8 -> 4: "
                                    "in place, no engine restarts")
    assert "NeedsActorReconfigure" in effect.detail and "initial_replicas" in effect.detail
    assert effect.downtime_seconds == 0 and result.chosen.downtime_seconds == 0


@pytest.mark.parametrize("old,new,turned", [
    ({"raypd:decode": {"autoscaling": AUTOSCALING}},
     {"raypd:decode": {"autoscaling": AUTOSCALING}, "raypd:prefill": {"autoscaling": AUTOSCALING}},
     "prefill: autoscaling turned on (1..4 replicas, target 8 ongoing requests each, starting at 1): "),
    ({"raypd:decode": {"autoscaling": AUTOSCALING}, "raypd:prefill": {"replicas": 2, "autoscaling": {
        **AUTOSCALING, "maxReplicas": 2}}},
     {"raypd:decode": {"autoscaling": AUTOSCALING}, "raypd:prefill": {"replicas": 2}},
     "prefill: autoscaling turned off, a fixed count of 2: "),
])
def test_turning_a_second_phases_autoscaling_on_or_off_is_in_place_and_says_so(old, new, turned):
    # Another phase still autoscales: the workers keep the do-not-evict annotation (same Ray
    # cluster) and the application its policy (same code version); a fixed phase of an autoscaled
    # application is already rendered as a pinned autoscaling_config, which is all that changes.
    result = assessment(old, new)
    assert result.kind == Kind.IN_PLACE and not result.disruptive
    (effect,) = [e for e in result.effects if e.subject == "raypd:prefill.autoscaling"]
    assert effect.detail.startswith(turned + "in place, no engine restarts")
    assert "NeedsActorReconfigure" in effect.detail and effect.downtime_seconds == 0


def test_a_zero_downtime_stack_turns_autoscaling_on_without_downtime():
    result = assessment({"raypd:upgradeStrategy": "newCluster"},
                        {"raypd:upgradeStrategy": "newCluster", "raypd:decode": {"autoscaling": AUTOSCALING}})
    assert result.chosen.name == "newCluster" and result.chosen.downtime_seconds == 0


# ---- issue 30: the node groups' size limits (decode scales 1..4, or 2..3) ----

def _decode_scaling(replicas: int, low: int, high: int) -> dict[str, Any]:
    return {"raypd:decode": {"replicas": replicas, "autoscaling": {
        "minReplicas": low, "maxReplicas": high, "targetOngoingRequests": 8}}}


def test_new_size_limits_are_an_in_place_resize_of_the_node_group():
    # The reference's shared group: prefill 1 + decode 2..2 = 3..3 nodes -> 1 + (1..4) = 2..5.
    result = assessment(_decode_scaling(2, 2, 2), _decode_scaling(2, 1, 4))
    assert result.kind == Kind.IN_PLACE and not result.disruptive
    (limits,) = [e for e in result.effects if e.subject == "GPU node group gpu"]
    assert limits.kind == Kind.IN_PLACE and limits.downtime_seconds == 0
    assert "size limits 3..3 -> 2..5 x g6.8xlarge: an in-place resize of the node group" in limits.detail
    assert "EKS, not Ray" not in limits.detail  # a higher maximum drains nothing


def test_a_lower_maximum_says_eks_may_drain_a_single_engines_node():
    result = assessment(_decode_scaling(2, 1, 4), _decode_scaling(3, 2, 3))
    (limits,) = [e for e in result.effects if e.subject == "GPU node group gpu"]
    assert "size limits 2..5 -> 3..4" in limits.detail
    assert "grow to 3 at once" in limits.detail and "shrink to 4" in limits.detail
    # Prefill keeps one engine on the shared group: the node EKS drains may be its.
    assert "EKS, not Ray, picks the nodes to drain" in limits.detail and limits.downtime_seconds > 0
