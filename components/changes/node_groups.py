"""What a change of the node groups does, for the change preview (components.changes.assess): the
system node group, the GPU node groups, and the GPU zone they sit in.

Read with the rules of pulumi-eks and EKS: a managed node group whose instance type, subnet (zone)
or name changes is replaced, new group first (create-before-delete), so old and new run side by
side until the end of the update; its size changes in place, and so do its size limits (min/max,
which the node autoscaler moves the size between: components.plan.scaling_bounds); its disk (in
the launch template pulumi-eks builds for raypd's IMDSv2 setting) rolls: EKS adds surge nodes,
then drains the old ones one by one, as far as the worker groups' disruption budgets let it
(components.render.disruption; `drain_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from components.changes.effects import Effect, Kind, minutes
from components.config.spec import DeploymentSpec
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.scaling_bounds import NodeBounds, group_node_bounds
from components.plan.topology import DeploymentPlan, GpuGroupPlan
from components.render.disruption import budget_floor
from components.render.outputs import SYSTEM_ZONE_KEY

UNRESOLVED_ZONE = "(resolved at deploy time)"


def gpu_zone(spec: DeploymentSpec, deployed_zone: Optional[str] = None) -> str:
    """The GPU zone a side runs in: the configured one, else the zone the stack was deployed to
    (zones never move on their own, components.plan.zones), else one resolved at deploy time."""
    return spec.availability_zone or deployed_zone or UNRESOLVED_ZONE


@dataclass
class NodeGroupChanges:
    """The node groups' effects, and which groups run extra nodes during the update."""

    old_zone: str
    new_zone: str
    effects: list[Effect] = field(default_factory=list)
    replaced: list[GpuGroupPlan] = field(default_factory=list)  # new groups started beside an old one
    superseded: list[GpuGroupPlan] = field(default_factory=list)  # old groups running until the end
    rolled: list[GpuGroupPlan] = field(default_factory=list)
    system_replaced: bool = False


def node_group_changes(old: DeploymentPlan, new: DeploymentPlan,
                       deployed_zone: Optional[str]) -> NodeGroupChanges:
    """The system node group, then each GPU node group, then the zone they move to."""
    before, after = old.spec, new.spec
    changes = NodeGroupChanges(gpu_zone(before, deployed_zone), gpu_zone(after, deployed_zone))
    _system_nodes(before, after, changes)
    old_groups = {group.name: group for group in old.groups}
    new_groups = {group.name: group for group in new.groups}
    for name, group in new_groups.items():
        previous = old_groups.get(name)
        if previous is not None:
            _kept_group(previous, group, old, new, changes)
    gone = ", ".join(sorted(set(old_groups) - set(new_groups)))
    for name in sorted(set(new_groups) - set(old_groups)):
        group = new_groups[name]
        changes.replaced.append(group)
        changes.effects.append(Effect(
            f"GPU node group {name}", Kind.REPLACE_NODES,
            f"a new node group of {group.nodes} x {group.instance_type} "
            f"({minutes(TYPICAL_SECONDS['eks:index:ManagedNodeGroup[gpu]'])})"
            + (f"; the old group(s) {gone} are deleted at the end of the update, so both run (and "
               "are billed) meanwhile" if gone else ""),
        ))
    if changes.old_zone != changes.new_zone:
        changes.effects.append(Effect(
            "raypd:availabilityZone", Kind.IN_PLACE,
            "allowed onto the stack's second zone only (EKS keeps a cluster's subnets in the zones "
            "it was created in; any other zone is refused before anything changes): the two zones "
            "swap, the EKS cluster's subnets are updated in place (no new control plane), the GPU "
            "node groups move with new subnets (above), and the NAT gateway moves (the old one "
            "first: a few minutes without internet egress from the nodes); the system nodes, and "
            "the metrics stack's volumes, stay in their zone",
        ))
    changes.superseded += [old_groups[name] for name in sorted(set(old_groups) - set(new_groups))]
    return changes


def endpoint_proxy_move_seconds(after: DeploymentSpec) -> float:
    """How long the endpoint is down while its proxy moves off drained system nodes: Envoy
    Gateway runs one proxy pod with no disruption budget (components.plan.typical_durations [eg-1.9]),
    and behind a load balancer the new pod serves only once the NLB has registered it."""
    seconds = CHANGE_TIMES["endpoint-proxy-move"].seconds
    if after.endpoint.load_balanced:
        seconds += CHANGE_TIMES["nlb-target-registration"].seconds
    return seconds


def _system_nodes(before: DeploymentSpec, after: DeploymentSpec, changes: NodeGroupChanges) -> None:
    if before.system_nodes.instance_type != after.system_nodes.instance_type:
        changes.system_replaced = True
        proxy = endpoint_proxy_move_seconds(after)
        # Not the Ray cluster's doing, so a zero-downtime switch does not avoid it: the old system
        # nodes drain at the end of the update whichever strategy runs (node_group_changes).
        changes.effects.append(Effect(
            "raypd:systemNodes.instanceType", Kind.REPLACE_NODES,
            "the system node group is replaced (the new one first); the Ray head moves to it with "
            "a new Ray cluster (below), and the KubeRay operator, CoreDNS and the endpoint's proxy "
            "move when the old nodes drain at the end of the update. The proxy is a single pod, so "
            "the endpoint is down until it runs on the new node"
            + (" and the load balancer has registered it" if after.endpoint.load_balanced else "")
            + f" ({minutes(proxy)}, whichever the strategy)",
            proxy,
        ))
    elif before.system_nodes.count != after.system_nodes.count:
        warm_cluster = CHANGE_TIMES["ray-cluster-warm-nodes"].seconds
        grows = after.system_nodes.count > before.system_nodes.count
        changes.effects.append(Effect(
            "raypd:systemNodes.count", Kind.IN_PLACE,
            "the system node group grows in place" if grows else (
                "the system node group shrinks in place, and EKS picks which node to drain: if it "
                "is the one holding the Ray head, the whole Ray cluster restarts "
                f"({minutes(warm_cluster)} of downtime)"),
            0.0 if grows else warm_cluster,
        ))


def system_zone_migration(deployed_outputs: Optional[Mapping[str, Any]]) -> Optional[Effect]:
    """The first `up` by this raypd of a stack whose system node group spans both zones (its outputs
    have a schemaVersion but no `systemZone`): the group moves into one zone
    (components.plan.zones.system_zone), a new subnet list, so pulumi-eks replaces it. Its Ray head
    is evicted when the old group drains at the end of the update; KubeRay starts a new head on the
    new node, which pulls the image first, and the workers' Ray processes, which lose their head,
    restart with it. None for a new stack or outputs that are not a raypd outputs document."""
    if (deployed_outputs is None or "schemaVersion" not in deployed_outputs
            or SYSTEM_ZONE_KEY in deployed_outputs):
        return None
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    return Effect(
        "the system node group (one zone)", Kind.REPLACE_NODES,
        "this raypd keeps the system nodes in one zone (the first of the stack's two by name), so "
        "that a node roll cannot leave Prometheus and Grafana on the other side of their volumes: "
        "the group is replaced once, the new one first. When the old one drains at the end of the "
        "update the Ray head restarts on the new node (pulling the image there) and with it the "
        f"whole Ray cluster: {minutes(cold_cluster)} of downtime, whatever raypd:upgradeStrategy; "
        "the KubeRay operator and CoreDNS move too",
        cold_cluster,
    )


def _kept_group(previous: GpuGroupPlan, group: GpuGroupPlan, old: DeploymentPlan, new: DeploymentPlan,
                changes: NodeGroupChanges) -> None:
    """A GPU node group on both sides: replaced (type or zone), resized (its size, or the limits
    the node autoscaler keeps it within), or rolled (its disk)."""
    name = group.name
    before, after = group_node_bounds(previous), group_node_bounds(group)
    if previous.instance_type != group.instance_type or changes.old_zone != changes.new_zone:
        what = (f"{previous.instance_type} -> {group.instance_type}"
                if previous.instance_type != group.instance_type
                else f"zone {changes.old_zone} -> {changes.new_zone}")
        changes.replaced.append(group)
        changes.superseded.append(previous)
        changes.effects.append(Effect(
            f"GPU node group {name}", Kind.REPLACE_NODES,
            f"{what}: a new node group of {group.nodes} x {group.instance_type} is created "
            f"first ({minutes(TYPICAL_SECONDS['eks:index:ManagedNodeGroup[gpu]'])}), the old "
            f"{previous.nodes} x {previous.instance_type} is deleted at the end of the update: both "
            "run (and are billed) meanwhile",
        ))
    elif before.autoscaled or after.autoscaled:
        if (before.minimum, before.maximum) != (after.minimum, after.maximum):
            changes.effects.append(_limits_resized(before, after, group, new))
    elif previous.nodes != group.nodes:
        changes.effects.append(_resized(previous, group, new))
    if previous.root_volume_gb != group.root_volume_gb and previous.instance_type == group.instance_type:
        changes.rolled.append(group)
        words, downtime = drain_cost(group, new)
        changes.effects.append(Effect(
            f"GPU node group {name}", Kind.ROLL_NODES,
            f"root volume {previous.root_volume_gb} -> {group.root_volume_gb} GB is in the "
            f"launch template: the group rolls (surge nodes, then drain); {words}", downtime,
        ))


def drain_cost(group: GpuGroupPlan, plan: DeploymentPlan) -> tuple[str, float]:
    """What draining a GPU group's nodes one by one (a roll) costs serving, with the group's
    disruption budget (components.render.disruption): (words, downtime in seconds).

    A phase whose fewest engines fit on one node (`min_nodes` 1) can lose them all to one drain,
    budget or not: they move to a surge node (image pull, model load). A phase on two nodes or more
    keeps an engine through each drain, except that the budget counts the new worker pod healthy
    once Ray runs on it, before its engine has loaded: the next drain may take the phase's other
    engine meanwhile, so up to one model load of downtime."""
    floor = budget_floor(group)
    budget = (f"its disruption budget (minAvailable {floor}) lets one worker pod go at a time"
              if floor is not None else "it has one worker pod, so no disruption budget")
    alone = [name for name in group.phases if name in plan.phases and plan.spec.phases[name].min_nodes <= 1]
    if alone:
        cold = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
        return (f"{budget}, but {' and '.join(alone)} can lose all its engines to one drain (the fewest "
                f"it runs fit on one node): they restart on a surge node, downtime {minutes(cold)}; run "
                "engines on two nodes or more to ride it out", cold)
    model_load = CHANGE_TIMES["engine-restart"].seconds
    return (f"{budget}: each phase keeps an engine through each drain, at reduced capacity, up to "
            f"{minutes(model_load)} of downtime if a drain takes a phase's other engine while the "
            "moved one still loads the model (the budget counts a pod ready before its engine is)",
            model_load)


def _resized(previous: GpuGroupPlan, group: GpuGroupPlan, new: DeploymentPlan) -> Effect:
    model_load = CHANGE_TIMES["engine-restart"].seconds
    grows = group.nodes > previous.nodes
    # The node group shrinks before Serve hears of the new counts (the RayService waits for the
    # node groups), and EKS terminates whichever nodes it likes, not an idle one: the node may hold
    # an engine that stays, which then loads again elsewhere. Where a phase of this group keeps one
    # engine (always, on the shared group of the reference), that is downtime.
    alone = any(new.phases[p].replicas == 1 for p in group.phases if p in new.phases)
    return Effect(
        f"GPU node group {group.name}", Kind.IN_PLACE,
        f"{previous.nodes} -> {group.nodes} x {group.instance_type}, in place"
        + ("" if grows else (
            ": EKS, not Ray, picks the node to drain, and it may hold an engine that stays; "
            "that engine then loads the model again on a remaining node "
            f"({minutes(model_load)}"
            + (", downtime: a phase on this group keeps a single engine)" if alone
               else ", at reduced capacity)"))),
        0.0 if grows or not alone else model_load,
        on_running_nodes_only=True,
    )


def _limits_resized(before: NodeBounds, after: NodeBounds, group: GpuGroupPlan, new: DeploymentPlan) -> Effect:
    """New min/max of a group the node autoscaler moves: the managed node group's scaling config
    changes in place; the size it runs at stays unless it falls outside the new limits
    (NodeBounds.desired). A lower maximum may make EKS drain nodes it picks, as `_resized` says."""
    model_load = CHANGE_TIMES["engine-restart"].seconds
    detail = (f"size limits {before.minimum}..{before.maximum} -> {after.minimum}..{after.maximum} x "
              f"{group.instance_type}: an in-place resize of the node group (no node replaced, no "
              "engine restarted); the node autoscaler adds a node only for a Ray worker waiting for "
              "one and removes only nodes the Ray autoscaler has emptied")
    if after.minimum > before.minimum:
        detail += f"; fewer than {after.minimum} nodes running grow to {after.minimum} at once"
    downtime = 0.0
    if after.maximum < before.maximum:
        # Worst case: the group runs at its old maximum, and a phase on it may be at one engine.
        alone = any(new.spec.phases[p].min_replicas == 1 for p in group.phases if p in new.phases)
        detail += (f"; more than {after.maximum} nodes running shrink to {after.maximum}, and EKS, not "
                   "Ray, picks the nodes to drain: an engine on one loads the model again elsewhere "
                   f"({minutes(model_load)}"
                   + (", downtime if it is a phase's only engine)" if alone else ", at reduced capacity)"))
        downtime = model_load if alone else 0.0
    return Effect(f"GPU node group {group.name}", Kind.IN_PLACE, detail, downtime,
                  on_running_nodes_only=True)
