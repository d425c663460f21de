"""Typical durations, the plan's critical path and the in-run ETA (components.plan.durations)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from components.plan import durations
from components.plan.durations import (
    DEFAULT_SECONDS,
    GPU_NODE_GROUP,
    LATE_FLOOR_FRACTION,
    TYPICAL,
    TYPICAL_SECONDS,
    critical_path,
    duration_key,
    measured_durations,
    merged,
    remaining_seconds,
    seconds_for,
)

TABLE = {"t:a": 1.0, "t:b": 10.0, "t:c": 3.0, "t:d": 5.0}


def res(name: str, kind: str, *deps: str) -> dict[str, Any]:
    return {"type": kind, "name": name, "dependsOn": list(deps)}


# a -> b -> d and a -> c -> d: the diamond's long side is through b.
DIAMOND = [res("d", "t:d", "b", "c"), res("b", "t:b", "a"), res("c", "t:c", "a"), res("a", "t:a")]


# ---- critical path on hand-made graphs ----

def test_diamond_takes_the_long_side():
    path = critical_path(DIAMOND, TABLE)
    assert path.names == ("a", "b", "d")
    assert path.seconds == 1 + 10 + 5


def test_diamond_follows_the_weights_not_the_listing_order():
    path = critical_path(DIAMOND, {**TABLE, "t:b": 1.0, "t:c": 30.0})
    assert path.names == ("a", "c", "d")
    assert path.seconds == 1 + 30 + 5


def test_chain_sums_every_step():
    chain = [res("z", "t:b", "y"), res("y", "t:c", "x"), res("x", "t:a")]
    path = critical_path(chain, TABLE)
    assert path.names == ("x", "y", "z")
    assert path.seconds == 14


def test_independent_resources_run_in_parallel():
    path = critical_path([res("a", "t:a"), res("b", "t:b"), res("c", "t:c")], TABLE)
    assert path == durations.CriticalPath(10.0, ("b",))


def test_dependencies_outside_the_plan_are_ignored():
    plan = [res("b", "t:b", "a", "not-in-plan", "urn:pulumi:dev::raypd::x::y"), res("a", "t:a")]
    assert critical_path(plan, TABLE) == durations.CriticalPath(11.0, ("a", "b"))


def test_unknown_types_take_the_default_and_components_nothing():
    plan = [res("x", "aws:new/thing:Thing"), res("c", "raypd:new:Component", "x")]
    path = critical_path(plan, {})
    assert path.seconds == DEFAULT_SECONDS
    assert seconds_for(plan[1], {}) == 0.0


def test_empty_plan_takes_no_time():
    assert critical_path([], TABLE) == durations.CriticalPath(0.0, ())


@pytest.mark.parametrize("plan, members", [
    ([res("a", "t:a", "b"), res("b", "t:b", "a")], {"a", "b"}),
    ([res("a", "t:a", "a")], {"a"}),
    ([res("x", "t:a"), res("a", "t:a", "x", "c"), res("b", "t:b", "a"), res("c", "t:c", "b")], {"a", "b", "c"}),
])
def test_a_cycle_raises_and_names_it(plan, members):
    with pytest.raises(ValueError, match="cycle") as raised:
        critical_path(plan, TABLE)
    named = set(str(raised.value).split(": ", 1)[1].split(" -> "))
    assert named == members
    with pytest.raises(ValueError, match="cycle"):
        remaining_seconds(plan, TABLE, set(), {})


def test_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="'a'"):
        critical_path([res("a", "t:a"), res("a", "t:b")], TABLE)


def test_a_long_chain_does_not_hit_the_recursion_limit():
    chain = [res("n0", "t:a")] + [res(f"n{i}", "t:a", f"n{i - 1}") for i in range(1, 5000)]
    assert critical_path(chain, TABLE).seconds == 5000


# ---- the table ----

def test_every_entry_has_a_source_and_a_sane_number():
    for key, entry in TYPICAL.items():
        assert entry.source.strip(), key
        assert 0 <= entry.seconds < 3600, key
    assert TYPICAL_SECONDS[GPU_NODE_GROUP] > TYPICAL_SECONDS["eks:index:ManagedNodeGroup"]


def test_gpu_node_groups_have_their_own_key():
    gpu = {"type": "eks:index:ManagedNodeGroup", "name": "g",
           "inputs": {"amiType": "AL2023_x86_64_NVIDIA", "labels": {"role": "gpu-worker"}}}
    system = {"type": "eks:index:ManagedNodeGroup", "name": "s",
              "inputs": {"amiType": "AL2023_x86_64_STANDARD", "labels": {"role": "system"}}}
    assert duration_key(gpu) == GPU_NODE_GROUP
    assert duration_key(system) == "eks:index:ManagedNodeGroup"
    # A measured-only mapping without the GPU key falls back to the plain type.
    assert seconds_for(gpu, {"eks:index:ManagedNodeGroup": 42.0}) == 42.0


# ---- the reference plan ----

@pytest.fixture(scope="module")
def reference_resources() -> list[dict[str, Any]]:
    from components.stack.offline_plan import plan_file

    return plan_file("Pulumi.dev.yaml")["resources"]


def _longest_by_enumeration(resources, table) -> float:
    """Oracle: the longest path by walking every chain (fine on ~30 resources)."""
    by_name = {r["name"]: r for r in resources}

    def longest_ending_at(name: str) -> float:
        deps = [d for d in by_name[name]["dependsOn"] if d in by_name]
        return seconds_for(by_name[name], table) + max((longest_ending_at(d) for d in deps), default=0.0)

    return max(longest_ending_at(name) for name in by_name)


def _dependency_order(resources) -> list[str]:
    """Names so that each comes after everything it depends on (as the engine would finish them)."""
    names = {r["name"] for r in resources}
    order: list[str] = []
    while len(order) < len(resources):
        for r in resources:
            if r["name"] not in order and all(d in order for d in r["dependsOn"] if d in names):
                order.append(r["name"])
    return order


def test_the_table_knows_every_type_of_the_reference_plan(reference_resources):
    assert {duration_key(r) for r in reference_resources} <= set(TYPICAL)


def test_reference_critical_path_goes_through_cluster_gpu_group_and_rayservice(reference_resources):
    path = critical_path(reference_resources, TYPICAL_SECONDS)
    by_name = {r["name"]: r for r in reference_resources}
    keys = [duration_key(by_name[name]) for name in path.names]
    assert "eks:index:Cluster" in keys
    assert GPU_NODE_GROUP in keys
    # The RayService, then the rollout check that waits on it (components.render.rollout).
    assert keys[-2:] == ["kubernetes:ray.io/v1:RayService", "kubernetes:batch/v1:Job"]
    # Every step depends on the one before it: a real chain of the plan.
    for before, after in zip(path.names, path.names[1:], strict=False):
        assert before in by_name[after]["dependsOn"]
    # It totals what the table says for its steps, and no chain of the plan is longer.
    assert path.seconds == sum(TYPICAL_SECONDS[key] for key in keys)
    assert path.seconds == _longest_by_enumeration(reference_resources, TYPICAL_SECONDS)
    assert path.seconds >= (TYPICAL_SECONDS["eks:index:Cluster"] + TYPICAL_SECONDS[GPU_NODE_GROUP]
                            + TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"])


def test_a_slow_helm_release_moves_the_path_to_the_system_group(reference_resources):
    table = merged(TYPICAL_SECONDS, {"kubernetes:helm.sh/v3:Release": 2000.0})
    path = critical_path(reference_resources, table)
    assert "cluster-system" in path.names and "gpu-nodes-group" not in path.names
    assert path.seconds == _longest_by_enumeration(reference_resources, table)


# ---- the ETA during a run ----

def test_remaining_starts_at_the_critical_path_and_decreases_as_resources_finish(reference_resources):
    total = critical_path(reference_resources, TYPICAL_SECONDS).seconds
    assert remaining_seconds(reference_resources, TYPICAL_SECONDS, set(), {}) == total
    by_name = {r["name"]: r for r in reference_resources}
    # Finish resources in a dependency order (the plan's path first), checking the ETA never grows.
    order = _dependency_order(reference_resources)
    finished: set[str] = set()
    previous = total
    for name in order:
        finished.add(name)
        now = remaining_seconds(reference_resources, TYPICAL_SECONDS, finished, {})
        assert now <= previous
        previous = now
    assert previous == 0.0
    # Once the cluster and everything not waiting on it are done, the GPU group and the
    # RayService are what is left.
    assert by_name["cluster-eks"]["type"] == "eks:index:Cluster"
    after_cluster: set[str] = set()
    for name in order:
        if any(d == "cluster-eks" or d in after_cluster for d in by_name[name]["dependsOn"]):
            after_cluster.add(name)
    done = {name for name in order if name not in after_cluster}
    left = remaining_seconds(reference_resources, TYPICAL_SECONDS, done, {})
    assert left == (TYPICAL_SECONDS[GPU_NODE_GROUP] + TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
                    + TYPICAL_SECONDS["kubernetes:batch/v1:Job"])
    # Five minutes into the GPU group, five minutes less are left.
    later = remaining_seconds(reference_resources, TYPICAL_SECONDS, done, {"gpu-nodes-group": 300.0})
    assert later == left - 300.0


def test_remaining_honours_elapsed_time_with_a_floor():
    typical_b = TABLE["t:b"]
    # a finished, b running for 4 s of its 10: 6 s of b left, then d's 5.
    assert remaining_seconds(DIAMOND, TABLE, {"a"}, {"b": 4.0}) == (typical_b - 4) + 5
    # b running late: at least LATE_FLOOR_FRACTION of it is still expected, not zero.
    late = remaining_seconds(DIAMOND, TABLE, {"a", "c"}, {"b": 60.0})
    assert late == LATE_FLOOR_FRACTION * typical_b + 5
    assert late > TABLE["t:d"]
    # c started too (its dependency a is behind it), b finished: c's remaining, then d.
    assert remaining_seconds(DIAMOND, TABLE, {"a", "b"}, {"c": 1.0}) == 2 + 5
    # A started resource's dependencies do not count even if their finish event was missed.
    assert remaining_seconds(DIAMOND, TABLE, set(), {"b": 0.0, "c": 0.0}) == 10 + 5
    # Names not in the plan, and a finished resource also listed as started, are harmless.
    assert remaining_seconds(DIAMOND, TABLE, {"a", "b", "c", "d", "zz"}, {"b": 1.0, "yy": 3.0}) == 0.0
    assert remaining_seconds(DIAMOND, TABLE, {"a"}, {"b": math.nan}) == 10 + 5


# ---- measured durations ----

def test_measured_medians_ignore_bad_samples():
    samples = [("eks:index:Cluster", 600.0), ("eks:index:Cluster", 700.0), ("eks:index:Cluster", 6000.0),
               ("eks:index:Cluster", -1.0), ("eks:index:Cluster", 0.0), ("eks:index:Cluster", math.nan),
               ("eks:index:Cluster", math.inf), ("aws:ec2/vpc:Vpc", 4.0), ("aws:ec2/vpc:Vpc", 6.0),
               ("aws:iam/role:Role", 0.0)]
    assert measured_durations(samples) == {"eks:index:Cluster": 700.0, "aws:ec2/vpc:Vpc": 5.0}
    assert measured_durations([]) == {}


def test_measured_medians_override_the_table(reference_resources):
    measured = measured_durations([("eks:index:Cluster", 500.0), ("eks:index:Cluster", 520.0),
                                   (GPU_NODE_GROUP, 300.0)])
    table = merged(TYPICAL_SECONDS, measured)
    assert table["eks:index:Cluster"] == 510.0 and table[GPU_NODE_GROUP] == 300.0
    assert table["kubernetes:ray.io/v1:RayService"] == TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    assert TYPICAL_SECONDS["eks:index:Cluster"] == TYPICAL["eks:index:Cluster"].seconds  # not mutated
    path = critical_path(reference_resources, table)
    assert path.seconds == _longest_by_enumeration(reference_resources, table)
    assert path.seconds < critical_path(reference_resources, TYPICAL_SECONDS).seconds
