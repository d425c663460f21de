"""The worker groups' PodDisruptionBudgets (issue 31 §1; components.render.disruption): an integer
minAvailable (Kubernetes cannot count a maxUnavailable or a percentage for pods a RayCluster owns),
one worker pod of a group at a time, never a budget that blocks every drain, a selector that follows
every RayCluster generation, and a change preview whose node-roll words say what a drain still costs."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from components.changes.assess import assess
from components.changes.effects import Kind
from components.changes.node_groups import drain_cost
from components.config.spec import DeploymentSpec
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.topology import DeploymentPlan, plan_deployment
from components.render.disruption import disruption_budgets
from components.render.rayservice import render_rayservice

HETEROGENEOUS = {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
                 "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2}}
TWO_EACH = {"raypd:prefill": {"replicas": 2}, "raypd:decode": {"replicas": 2}}
AUTOSCALED = {"raypd:decode": {"replicas": 2, "autoscaling": {"minReplicas": 2, "maxReplicas": 4,
                                                              "targetOngoingRequests": 8}}}


def plan_of(config: dict[str, Any]) -> DeploymentPlan:
    return plan_deployment(DeploymentSpec.from_config(config, "dev"))


def disruptions_allowed(budget: dict[str, Any], pods: list[dict[str, Any]],
                        owner_scale: Optional[int] = None) -> int:
    """Kubernetes' own arithmetic (pkg/controller/disruption/disruption.go, `getExpectedPodCount`,
    `updatePdbStatus`, `failSafe`): maxUnavailable and a percentage minAvailable need the pods'
    controller's scale subresource (`owner_scale`: None for a RayCluster, which has none: the sync
    fails and disruptionsAllowed is set to 0); an integer minAvailable counts the selected pods."""
    selector = budget["spec"]["selector"]["matchLabels"]
    chosen = [pod for pod in pods if all(pod["labels"].get(k) == v for k, v in selector.items())]
    spec = budget["spec"]
    minimum = spec.get("minAvailable")
    if "maxUnavailable" in spec or isinstance(minimum, str):
        if owner_scale is None:
            return 0  # SyncFailed: "rayclusters.ray.io does not implement the scale subresource"
        raise AssertionError("not modelled: raypd's pods have no scalable owner")
    assert isinstance(minimum, int) and not isinstance(minimum, bool)
    healthy = sum(1 for pod in chosen if pod["ready"])
    return max(0, healthy - minimum) if chosen else 0


def worker_pods(plan: DeploymentPlan, cluster: str, ready: bool = True) -> list[dict[str, Any]]:
    """The worker pods of one RayCluster generation, labelled as KubeRay labels them (its labelPod)
    on top of the template's labels."""
    manifest = render_rayservice(plan, "us-east-2a")
    pods = []
    for group in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        template = group["template"]["metadata"]["labels"]
        for _ in range(group["replicas"]):
            pods.append({"ready": ready, "labels": {**template, "ray.io/cluster": cluster,
                                                    "ray.io/node-type": "worker",
                                                    "ray.io/group": group["groupName"]}})
    head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["metadata"]["labels"]
    pods.append({"ready": True, "labels": {**head, "ray.io/cluster": cluster, "ray.io/node-type": "head",
                                           "ray.io/group": "headgroup"}})
    return pods


def test_the_reference_group_lets_one_of_its_two_worker_pods_go_at_a_time():
    plan = plan_of({})
    (budget,) = disruption_budgets(plan)
    assert budget["apiVersion"] == "policy/v1" and budget["kind"] == "PodDisruptionBudget"
    assert budget["metadata"]["namespace"] == "inference"
    spec = budget["spec"]
    assert "maxUnavailable" not in spec
    assert spec["minAvailable"] == 1 and type(spec["minAvailable"]) is int
    assert spec["selector"] == {"matchLabels": {"raypd.io/ray-service": "ray-llm", "ray.io/node-type": "worker",
                                                "ray.io/group": "gpu"}}
    assert spec["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    pods = worker_pods(plan, "ray-llm-abcde")
    assert disruptions_allowed(budget, pods) == 1  # one node drains; the second waits
    pods[0]["ready"] = False  # the first's replacement is not Ready yet
    assert disruptions_allowed(budget, pods) == 0


def test_the_budget_follows_the_live_cluster_through_a_new_cluster_upgrade():
    # A NewCluster upgrade names its RayCluster anew: a selector on ray.io/cluster would match only
    # one generation. raypd's label and KubeRay's group label match both.
    plan = plan_of(TWO_EACH)
    (budget,) = disruption_budgets(plan)
    old, new = worker_pods(plan, "ray-llm-aaaaa"), worker_pods(plan, "ray-llm-bbbbb")
    assert disruptions_allowed(budget, new) == 1
    assert disruptions_allowed(budget, old + new) == 5  # 8 worker pods, minAvailable 3: the old ones may go
    assert "ray.io/cluster" not in budget["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(("config", "expected"), [
    ({}, {"ray-llm-gpu-workers": 1}),
    (TWO_EACH, {"ray-llm-gpu-workers": 3}),
    # prefill's group has one node: no budget (it could only allow everything or block everything).
    (HETEROGENEOUS, {"ray-llm-decode-workers": 1}),
    ({"raypd:mode": "colocated"}, {"ray-llm-colocated-workers": 1}),
    ({"raypd:mode": "colocated", "raypd:colocated": {"replicas": 1}}, {}),
    # An autoscaled group: its pods at the minimum (prefill 1 + decode 2), minus one.
    (AUTOSCALED, {"ray-llm-gpu-workers": 2}),
])
def test_each_group_of_two_pods_or_more_gets_a_budget_that_never_blocks_every_drain(config, expected):
    plan = plan_of(config)
    budgets = {b["metadata"]["name"]: b["spec"]["minAvailable"] for b in disruption_budgets(plan)}
    assert budgets == expected
    for budget in disruption_budgets(plan):
        # A drain always goes on, one worker pod at a time: never 0 allowed with every pod ready.
        assert disruptions_allowed(budget, worker_pods(plan, "c")) >= 1


def test_no_budget_selects_the_head():
    # One pod: minAvailable 1 would block the system node's roll (a Kubernetes upgrade) for good.
    for config in ({}, TWO_EACH, HETEROGENEOUS):
        plan = plan_of(config)
        head = [pod for pod in worker_pods(plan, "c") if pod["labels"]["ray.io/node-type"] == "head"]
        for budget in disruption_budgets(plan):
            assert disruptions_allowed(budget, head) == 0 and budget["spec"]["selector"]["matchLabels"][
                "ray.io/node-type"] == "worker"


def test_a_roll_of_a_group_with_a_single_engine_phase_says_the_phase_goes_down():
    plan = plan_of({})
    words, downtime = drain_cost(plan.groups[0], plan)
    assert "minAvailable 1" in words and "prefill and decode can lose all its engines" in words
    assert downtime == TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]


def test_a_roll_of_a_group_whose_phases_run_on_two_nodes_costs_at_most_one_model_load():
    plan = plan_of(TWO_EACH)
    words, downtime = drain_cost(plan.groups[0], plan)
    assert "minAvailable 3" in words and "keeps an engine through each drain" in words
    assert "before its engine is" in words
    assert downtime == CHANGE_TIMES["engine-restart"].seconds


def test_a_group_of_one_node_has_no_budget_and_the_preview_says_so():
    plan = plan_of(HETEROGENEOUS)
    prefill = next(group for group in plan.groups if group.name == "prefill")
    words, downtime = drain_cost(prefill, plan)
    assert words.startswith("it has one worker pod, so no disruption budget")
    assert downtime == TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]


def test_the_root_volume_roll_in_the_preview_uses_the_drain_cost(monkeypatch):
    # A root volume size that changes between raypd versions rolls the GPU group.
    import components.plan.topology as topology

    old = plan_of(TWO_EACH)
    monkeypatch.setattr(topology.defaults, "MIN_ROOT_VOLUME_GB", topology.defaults.MIN_ROOT_VOLUME_GB + 50)
    new = plan_of(TWO_EACH)
    assert old.groups[0].root_volume_gb != new.groups[0].root_volume_gb
    (roll,) = [e for e in assess(old, new, "us-east-2a").effects if e.kind == Kind.ROLL_NODES]
    assert "minAvailable 3" in roll.detail and roll.downtime_seconds == CHANGE_TIMES["engine-restart"].seconds
