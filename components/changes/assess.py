"""What changing a running deployment does to serving, before anything runs: two plans in, words out.

The questions an operator asks before pressing Deploy: does the endpoint go down, for how long,
which nodes are added or replaced (and what that costs in quota and money), and is there a way to
avoid the downtime. The answers come from what the program would render for each side (node-group
plans, the RayService manifest, the Serve config), read with the rules of the systems that act on
them, one module per part, each citing its rules: the EKS cluster (components.changes.cluster),
the node groups (node_groups), the RayService (rayservice), the add-ons (addons), the endpoint
(endpoint) and the metrics stack (observability).

The two ways a restart or rebuild can happen (`raypd:upgradeStrategy`) are priced here: in place
(downtime about one model load, no extra nodes) or a new cluster (KubeRay's NewCluster upgrade on a
new generation of GPU node groups: no downtime, a second set of GPU nodes until the switch).

`assess` is the one table of these effects: the web preview (both engines), the preflight's
update-headroom check and docs/infrastructure.md's settings table (components.changes.docs_table)
all read it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from components.changes.addons import addon_effects
from components.changes.cluster import (
    admin_access_effects,
    api_access_effects,
    cluster_replacement,
    kubernetes_version_effect,
)
from components.changes.effects import Assessment, Effect, Kind, Strategy, minutes
from components.changes.endpoint import endpoint_effects
from components.changes.fault_tolerance import fault_tolerance_effects
from components.changes.node_groups import node_group_changes, system_zone_migration
from components.changes.observability import observability_effects
from components.changes.rayservice import Side, rayservice_effects
from components.config.spec import DeploymentSpec
from components.plan.capacity import NodeLine, group_line, surge_nodes
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.topology import DeploymentPlan, GpuGroupPlan
from components.render.outputs import IMAGE_PROVENANCE_KEY


def assess(old: DeploymentPlan, new: DeploymentPlan,
           deployed_zone: Optional[str] = None,
           deployed_outputs: Optional[Mapping[str, Any]] = None) -> Assessment:
    """Every effect of going from `old` (deployed) to `new` (pending), and the strategies.

    `deployed_zone` is the GPU zone the deployed stack runs in (its `availabilityZone` output),
    so that naming that same zone is not a move; `deployed_outputs` (its stack outputs) tell a
    stack deployed before the lock-down (lockdown_effects)."""
    before, after = old.spec, new.spec
    replacement = cluster_replacement(before, after)
    if replacement is not None:
        return _priced([replacement], old, new, rebuild=False, superseded=())
    effects: list[Effect] = []
    version = kubernetes_version_effect(before, after)
    effects += [version] if version is not None else []
    # A Kubernetes upgrade rolls every GPU node group; so does a new root volume size.
    rolled = list(new.groups) if version is not None and version.kind == Kind.ROLL_NODES else []
    nodes = node_group_changes(old, new, deployed_zone)
    effects += nodes.effects
    moved = system_zone_migration(deployed_outputs)
    if moved is not None:
        effects.append(moved)
        nodes.system_replaced = True
    rolled += nodes.rolled
    serving, rebuild = rayservice_effects(Side(old, nodes.old_zone), Side(new, nodes.new_zone),
                                          on_new_nodes=bool(nodes.replaced) or nodes.system_replaced)
    effects += serving
    effects += addon_effects(before, after)
    effects += api_access_effects(before, after)
    effects += endpoint_effects(before.endpoint, after.endpoint)
    metrics = observability_effects(before, after, deployed_outputs)
    effects += metrics
    rebuild = rebuild or any(effect.kind == Kind.NEW_RAY_CLUSTER for effect in metrics)
    redis = fault_tolerance_effects(before, after, deployed_outputs)
    effects += redis
    rebuild = rebuild or any(effect.kind == Kind.NEW_RAY_CLUSTER for effect in redis)
    effects += admin_access_effects(before, after)
    effects += _strategy_switch_effects(before, after)
    migration = lockdown_effects(new, deployed_outputs)
    if migration:
        effects += migration
        rebuild = True
        rolled += [group for group in new.groups if group not in rolled]
    system_lines = ((NodeLine.of(before.system_nodes.instance_type, before.system_nodes.count,
                                 "the old system node group, until it is deleted at the end"),)
                    if nodes.system_replaced else ())
    switched = before.upgrade_strategy != after.upgrade_strategy
    return _priced(effects, old, new, rebuild=rebuild or switched, superseded=tuple(nodes.superseded),
                   rolled=tuple(rolled), system_lines=system_lines)


def _strategy_switch_effects(before: DeploymentSpec, after: DeploymentSpec) -> list[Effect]:
    if before.upgrade_strategy == after.upgrade_strategy:
        return []
    if after.upgrade_strategy == "newCluster":
        return [Effect(
            "raypd:upgradeStrategy", Kind.NEW_RAY_CLUSTER,
            "zero-downtime stacks run on generations of GPU node groups: the Ray cluster moves "
            "once, without downtime, onto a first generation (a second set of GPU nodes during the "
            "switch); later disruptive changes do the same",
        )]
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    return [Effect(
        "raypd:upgradeStrategy", Kind.NEW_RAY_CLUSTER,
        "back to in-place: the GPU node groups return to their in-place names (new groups) and "
        f"the RayService is replaced on them: the endpoint is down for {minutes(cold_cluster)}",
        cold_cluster,
    )]


# ---- once per stack: the first `up` by a raypd with issue 17's lock-down ----

# The stack output the lock-down program publishes (components.render.outputs); a deployed stack whose
# outputs lack it was last deployed by an earlier raypd.
LOCKDOWN_OUTPUT = IMAGE_PROVENANCE_KEY


def lockdown_effects(new: DeploymentPlan,
                     deployed_outputs: Optional[Mapping[str, Any]]) -> list[Effect]:
    """What the first `up` after the lock-down does to a stack deployed before it, whatever the
    settings: the GPU launch templates' IMDS hop limit (components.stack.node_groups) rolls every GPU
    node group; the Ray pods' new label (components.render.rayservice) and the image pinned by digest
    (components.config.image) rebuild the Ray cluster; the VPC CNI add-on turns its policy agent on in
    place. None for a new stack, or when the deployed outputs are not known or not a raypd
    outputs document (no `schemaVersion`, which every raypd program has exported)."""
    if (deployed_outputs is None or "schemaVersion" not in deployed_outputs
            or LOCKDOWN_OUTPUT in deployed_outputs):
        return []
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    roll = CHANGE_TIMES["node-group-roll"].seconds
    groups = ", ".join(group.name for group in new.groups)
    return [
        Effect("GPU node groups (lock-down)", Kind.ROLL_NODES,
               f"this raypd requires IMDSv2 with hop limit 1 on GPU nodes: a new launch template "
               f"version, so {groups} roll ({minutes(roll)} each: surge nodes, then drain); "
               "on zero-downtime stacks the new generation of node groups starts with it instead",
               cold_cluster),
        Effect("the Ray cluster (lock-down)", Kind.NEW_RAY_CLUSTER,
               "the Ray pods get the label the NetworkPolicies select and the image pinned by "
               f"digest: KubeRay needs a new Ray cluster ({minutes(cold_cluster)})", cold_cluster),
        Effect("VPC CNI (lock-down)", Kind.IN_PLACE,
               "the add-on's network-policy agent is turned on in place (the aws-node daemonset "
               "rolls; pods keep their addresses), then the NetworkPolicies are enforced"),
    ]


def _priced(effects: list[Effect], old: DeploymentPlan, new: DeploymentPlan, *, rebuild: bool,
             superseded: tuple[GpuGroupPlan, ...], rolled: tuple[GpuGroupPlan, ...] = (),
             system_lines: tuple[NodeLine, ...] = ()) -> Assessment:
    """Order the effects and price both strategies (the one chosen first)."""
    effects.sort(key=lambda effect: -effect.kind)
    if effects and effects[0].kind == Kind.REFUSED:
        return Assessment(tuple(effects), Strategy(
            "inPlace", 0.0, (), 0.0, "refused: the update would fail before it changes anything"))
    if not effects:
        effects.append(Effect("settings", Kind.NO_SERVING_EFFECT, "nothing the deployment runs changes"))
    gpu_group_time = TYPICAL_SECONDS["eks:index:ManagedNodeGroup[gpu]"]
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    surge = surge_nodes()
    replacement_lines = tuple(group_line(g, "the old node group, until it is deleted at the end")
                              for g in superseded) + system_lines
    roll_lines = tuple(group_line(g, "surge nodes of a rolling update", min(surge, g.nodes))
                       for g in rolled)
    peak_seconds = (gpu_group_time + cold_cluster if superseded or system_lines
                    else CHANGE_TIMES["node-group-roll"].seconds if rolled else 0.0)
    worst = max(effect.downtime_seconds for effect in effects)
    in_place = Strategy(
        "inPlace", worst, replacement_lines + roll_lines, peak_seconds,
        (f"{minutes(worst)} of downtime" if worst else "no downtime")
        + (f", {sum(line.nodes for line in replacement_lines + roll_lines)} extra node(s) "
           f"during the update ({minutes(peak_seconds)})" if replacement_lines or roll_lines
           else ", no extra nodes"),
    )
    switch_seconds = gpu_group_time + cold_cluster
    extra = tuple(group_line(g, "the old Ray cluster's nodes, until the switch") for g in old.groups)
    disruption = max((e.downtime_seconds for e in effects if e.kind in (
        Kind.RESTART_ENGINES, Kind.NEW_RAY_CLUSTER)), default=0.0)
    others = max((e.downtime_seconds for e in effects if e.kind not in (
        Kind.RESTART_ENGINES, Kind.NEW_RAY_CLUSTER) and not e.on_running_nodes_only), default=0.0)
    zero = Strategy(
        "newCluster", others, extra + roll_lines + system_lines, switch_seconds,
        ("no downtime" if not others else f"{minutes(others)} of downtime for the rest of the change")
        + f": a second Ray cluster on {sum(line.nodes for line in extra)} extra GPU node(s) for "
        f"{minutes(switch_seconds)}, traffic switched when it is Ready, the old one removed",
    )
    switched = old.spec.upgrade_strategy != new.spec.upgrade_strategy
    offer = (rebuild and not switched and disruption > 0
             and max((e.kind for e in effects if e.kind != Kind.NEW_LOAD_BALANCER),
                     default=Kind.NO_SERVING_EFFECT) <= Kind.NEW_RAY_CLUSTER)
    chosen = zero if new.spec.upgrade_strategy == "newCluster" and rebuild else in_place
    choices = (in_place, zero) if offer else ()
    return Assessment(tuple(effects), chosen, choices)
