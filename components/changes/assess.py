"""What changing a running deployment does to serving, before anything runs: two plans in, words out.

The questions an operator asks before pressing Deploy: does the endpoint go down, for how long,
which nodes are added or replaced (and what that costs in quota and money), and is there a way to
avoid the downtime. The answers come from what the program would render for each side (node-group
plans, the RayService manifest, the Serve config), read with the rules of the systems that act on
them:

- KubeRay (components.render.rayservice's docstring): a different cluster digest means a new Ray cluster;
  equal digests with different Serve args mean Ray Serve rebuilds the application, and since the
  args are each engine's init args it stops every outdated replica before starting its successor
  (`DeploymentState._stop_or_update_outdated_version_replicas`): with no spare GPU each engine is
  down for a model load; only the per-deployment replica counts change without a restart.
- Pulumi and pulumi-eks: a managed node group whose instance type, subnet (zone) or name changes is
  replaced, new group first (create-before-delete), so old and new run side by side until the end
  of the update; its size changes in place; its disk (in the launch template pulumi-eks builds for
  raypd's IMDSv2 setting) and its Kubernetes version roll: EKS adds surge nodes, then drains the
  old ones one by one.
- The two ways a restart or rebuild can happen (`raypd:upgradeStrategy`): in place (downtime about
  one model load, no extra nodes) or a new cluster (KubeRay's NewCluster upgrade on a new
  generation of GPU node groups: no downtime, a second set of GPU nodes until the switch).

`assess` is the one table of these effects: the web preview (both engines), the preflight's
update-headroom check and docs/infrastructure.md's settings table all read it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Mapping, Optional

import yaml

from components.config import catalogue
from components.config.spec import DeploymentSpec
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.topology import DeploymentPlan, GpuGroupPlan
from components.render.outputs import IMAGE_PROVENANCE_KEY


class Kind(IntEnum):
    """What a change does, least disruptive first (the docs table's words)."""

    NO_SERVING_EFFECT = 0
    IN_PLACE = 1
    ROLL_NODES = 2
    RESTART_ENGINES = 3
    REPLACE_NODES = 4
    NEW_RAY_CLUSTER = 5
    # The endpoint's load balancer is replaced or removed: clients outside the cluster must move.
    NEW_LOAD_BALANCER = 6
    NEW_ENDPOINT = 7
    REPLACE_CLUSTER = 8
    REFUSED = 9

    @property
    def words(self) -> str:
        return _KIND_WORDS[self]


_KIND_WORDS = {
    Kind.NO_SERVING_EFFECT: "no effect on serving",
    Kind.IN_PLACE: "in place",
    Kind.ROLL_NODES: "nodes roll (surge, then drain)",
    Kind.RESTART_ENGINES: "engines restart",
    Kind.REPLACE_NODES: "nodes replaced",
    Kind.NEW_RAY_CLUSTER: "new Ray cluster",
    Kind.NEW_LOAD_BALANCER: "new load balancer (new address)",
    Kind.NEW_ENDPOINT: "new RayService (new endpoint)",
    Kind.REPLACE_CLUSTER: "new EKS cluster",
    Kind.REFUSED: "refused",
}
STRATEGY_WORDS = {"inPlace": "in place", "newCluster": "zero downtime (new cluster)"}
# Extra nodes a managed node group may start during a rolling update (EKS user guide, "Managed node
# update behavior", scale-up phase): the Auto Scaling group's maximum and desired size grow by the
# larger of "up to twice the number of Availability Zones the Auto Scaling group is deployed in"
# and the update's maxUnavailable (default 1; raypd sets no updateConfig). New nodes start before
# old ones are drained.
GPU_GROUP_ZONES = 1  # every GPU node group sits in one subnet of the GPU AZ (EFA cannot cross AZs)
DEFAULT_MAX_UNAVAILABLE = 1
SURGE_NODES = max(2 * GPU_GROUP_ZONES, DEFAULT_MAX_UNAVAILABLE)


@dataclass(frozen=True)
class NodeLine:
    """`nodes` extra x `instance_type` for `why` (a peak during the update)."""

    instance_type: str
    nodes: int
    why: str

    @property
    def vcpus(self) -> int:
        return self.nodes * catalogue.CATALOGUE[self.instance_type].vcpus if (
            self.instance_type in catalogue.CATALOGUE) else 0

    @property
    def quota_code(self) -> str:
        known = catalogue.lookup(self.instance_type)
        return known.quota_code if known is not None else catalogue.QUOTA_STANDARD

    @property
    def usd_per_hour(self) -> Optional[float]:
        known = catalogue.lookup(self.instance_type)
        if known is None or known.usd_per_hour is None:
            return None
        return known.usd_per_hour * self.nodes


@dataclass(frozen=True)
class Effect:
    """One consequence: what changes, how (kind), in words, and the endpoint downtime it costs."""

    subject: str
    kind: Kind
    detail: str
    downtime_seconds: float = 0.0


@dataclass(frozen=True)
class Strategy:
    """One way to carry out the change: its downtime, its extra nodes and what they cost."""

    name: str  # inPlace | newCluster
    downtime_seconds: float
    # The nodes that run at the peak BEYOND the new settings' own nodes (the old group until it is
    # deleted, the old cluster's nodes until the switch, surge nodes): what the peak adds to the
    # new plan's quota need, and what the change costs beyond the new plan's price.
    extra_nodes: tuple[NodeLine, ...]
    # How long the extra nodes run (the switch, or the node-group replacement), and their cost.
    extra_seconds: float
    summary: str

    @property
    def extra_usd(self) -> Optional[float]:
        prices = [line.usd_per_hour for line in self.extra_nodes]
        if not self.extra_nodes:
            return 0.0
        if any(price is None for price in prices):
            return None
        return round(sum(p for p in prices if p is not None) * self.extra_seconds / 3600, 2)

    @property
    def extra_vcpus(self) -> dict[str, int]:
        """Extra vCPUs per Service Quotas code at the peak (what the preflight checks)."""
        extra: dict[str, int] = {}
        for line in self.extra_nodes:
            extra[line.quota_code] = extra.get(line.quota_code, 0) + line.vcpus
        return extra


@dataclass(frozen=True)
class Assessment:
    effects: tuple[Effect, ...]
    # The strategy the stack is set to (the one `up` uses) and, when the change restarts engines
    # or rebuilds the Ray cluster, both strategies to choose from.
    chosen: Strategy
    choices: tuple[Strategy, ...] = field(default=())

    @property
    def kind(self) -> Kind:
        return max((effect.kind for effect in self.effects), default=Kind.NO_SERVING_EFFECT)

    @property
    def disruptive(self) -> bool:
        """The change restarts engines or rebuilds the Ray cluster: the strategy matters."""
        return bool(self.choices)

    def as_dict(self) -> dict[str, Any]:
        """JSON form for the web preview and the API."""
        def strategy(item: Strategy) -> dict[str, Any]:
            return {
                "name": item.name, "words": STRATEGY_WORDS[item.name],
                "downtimeSeconds": round(item.downtime_seconds),
                "extraNodes": [{"instanceType": line.instance_type, "nodes": line.nodes,
                                "why": line.why} for line in item.extra_nodes],
                "extraSeconds": round(item.extra_seconds),
                "extraUsd": item.extra_usd,
                "extraVcpus": item.extra_vcpus,
                "summary": item.summary,
            }
        return {
            "kind": self.kind.words,
            "effects": [{"subject": e.subject, "kind": e.kind.words, "detail": e.detail,
                         "downtimeSeconds": round(e.downtime_seconds)} for e in self.effects],
            "chosen": strategy(self.chosen),
            "choices": [strategy(item) for item in self.choices],
        }


def minutes(seconds: float) -> str:
    return f"about {max(1, round(seconds / 60))} min"


# ---- what each side renders ----

UNRESOLVED_ZONE = "(resolved at deploy time)"


def _zone(spec: DeploymentSpec, deployed_zone: Optional[str] = None) -> str:
    """The GPU zone a side runs in: the configured one, else the zone the stack was deployed to
    (zones never move on their own, components.plan.zones), else one resolved at deploy time."""
    return spec.availability_zone or deployed_zone or UNRESOLVED_ZONE


def _rendered(plan: DeploymentPlan, zone: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(RayService manifest, its one Serve application) as the program would render them."""
    from components.render.rayservice import render_rayservice

    manifest = render_rayservice(plan, zone)
    (app,) = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
    return manifest, app


def _serve_code(app: dict[str, Any]) -> str:
    """What Ray Serve hashes into an application's code version (deploy_utils.get_app_code_version):
    a change here rebuilds the application and restarts every engine."""
    return json.dumps({k: app.get(k) for k in ("import_path", "runtime_env", "args")}, sort_keys=True)


def _replicas(plan: DeploymentPlan) -> dict[str, int]:
    return {name: phase.replicas for name, phase in plan.phases.items()}


def _groups(plan: DeploymentPlan) -> dict[str, GpuGroupPlan]:
    return {group.name: group for group in plan.groups}


def _node_line(group: GpuGroupPlan, why: str, nodes: Optional[int] = None) -> NodeLine:
    return NodeLine(group.instance_type, group.nodes if nodes is None else nodes, why)


def _in_place(plan: DeploymentPlan) -> DeploymentPlan:
    """The plan as an in-place stack would render it: what changes is judged once, the strategy
    only decides how it is carried out (a zero-downtime stack's node set changes with every
    rebuild by design)."""
    from components.plan.topology import plan_deployment

    if plan.spec.upgrade_strategy == "inPlace":
        return plan
    return plan_deployment(plan.spec.model_copy(update={"upgrade_strategy": "inPlace"}))


# ---- the assessment ----

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


def assess(old: DeploymentPlan, new: DeploymentPlan,
           deployed_zone: Optional[str] = None,
           deployed_outputs: Optional[Mapping[str, Any]] = None) -> Assessment:
    """Every effect of going from `old` (deployed) to `new` (pending), and the strategies.

    `deployed_zone` is the GPU zone the deployed stack runs in (its `availabilityZone` output),
    so that naming that same zone is not a move; `deployed_outputs` (its stack outputs) tell a
    stack deployed before the lock-down (lockdown_effects)."""
    from components.render.rayservice import RAY_CLUSTER_DIGEST_ANNOTATION

    before, after = old.spec, new.spec
    effects: list[Effect] = []
    times = CHANGE_TIMES
    model_load = times["engine-restart"].seconds
    warm_cluster = times["ray-cluster-warm-nodes"].seconds
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    gpu_group_time = TYPICAL_SECONDS["eks:index:ManagedNodeGroup[gpu]"]
    cluster_time = TYPICAL_SECONDS["eks:index:Cluster"]

    # ---- the EKS cluster itself ----
    if (before.region, before.effective_cluster_name) != (after.region, after.effective_cluster_name):
        effects.append(Effect(
            "aws:region / raypd:clusterName", Kind.REPLACE_CLUSTER,
            f"a new EKS cluster and everything on it ({minutes(cluster_time + gpu_group_time + cold_cluster)}); "
            "the old one is deleted after: the endpoint is down meanwhile and its address changes",
            cluster_time + gpu_group_time + cold_cluster,
        ))
        return _finish(effects, old, new, rebuild=False, superseded=())

    old_groups, new_groups = _groups(old), _groups(new)
    replaced: list[GpuGroupPlan] = []  # new groups started beside an old one
    superseded: list[GpuGroupPlan] = []  # old groups that keep running until the update ends
    rolled: list[GpuGroupPlan] = []
    old_minor = int(before.kubernetes_version.split(".")[1])
    new_minor = int(after.kubernetes_version.split(".")[1])
    if new_minor < old_minor or new_minor > old_minor + 1:
        effects.append(Effect(
            "raypd:kubernetesVersion", Kind.REFUSED,
            f"{before.kubernetes_version} -> {after.kubernetes_version}: EKS upgrades one minor "
            "version at a time and never downgrades, so the update fails at its first step; "
            f"go to 1.{old_minor + 1} first" if new_minor > old_minor else
            f"{before.kubernetes_version} -> {after.kubernetes_version}: EKS never downgrades a "
            "cluster; the update fails at its first step",
        ))
    elif before.kubernetes_version != after.kubernetes_version:
        control = times["control-plane-upgrade"].seconds
        roll = times["node-group-roll"].seconds
        rolled = list(new.groups)
        effects.append(Effect(
            "raypd:kubernetesVersion", Kind.ROLL_NODES,
            f"EKS upgrades the control plane ({minutes(control)}), then every managed node group "
            f"rolls ({minutes(roll)} each): EKS starts surge nodes of the same type, then drains "
            "the old ones. That includes the system node holding the Ray head, the KubeRay "
            "operator and CoreDNS, so the whole Ray cluster restarts: a full outage of "
            f"{minutes(roll + cold_cluster)}; the GPU surge nodes need spare quota and free capacity "
            "in the cluster placement group (capacity risk on large GPU types); CoreDNS is upgraded "
            "to the version made for the new Kubernetes",
            roll + cold_cluster,
        ))

    # ---- system nodes ----
    system_replaced = before.system_nodes.instance_type != after.system_nodes.instance_type
    if system_replaced:
        effects.append(Effect(
            "raypd:systemNodes.instanceType", Kind.REPLACE_NODES,
            "the system node group is replaced (the new one first); the Ray head moves to it with "
            "a new Ray cluster (below), and the KubeRay operator and CoreDNS move when the old "
            "nodes drain at the end of the update",
        ))
    elif before.system_nodes.count != after.system_nodes.count:
        grows = after.system_nodes.count > before.system_nodes.count
        effects.append(Effect(
            "raypd:systemNodes.count", Kind.IN_PLACE,
            "the system node group grows in place" if grows else (
                "the system node group shrinks in place, and EKS picks which node to drain: if it "
                "is the one holding the Ray head, the whole Ray cluster restarts "
                f"({minutes(warm_cluster)} of downtime)"),
            0.0 if grows else warm_cluster,
        ))

    # ---- GPU node groups ----
    old_zone, new_zone = _zone(before, deployed_zone), _zone(after, deployed_zone)
    zone_moved = old_zone != new_zone
    for name, group in new_groups.items():
        previous = old_groups.get(name)
        if previous is None:
            continue
        if previous.instance_type != group.instance_type or zone_moved:
            what = (f"{previous.instance_type} -> {group.instance_type}"
                    if previous.instance_type != group.instance_type
                    else f"zone {old_zone} -> {new_zone}")
            replaced.append(group)
            superseded.append(previous)
            effects.append(Effect(
                f"GPU node group {name}", Kind.REPLACE_NODES,
                f"{what}: a new node group of {group.nodes} x {group.instance_type} is created "
                f"first ({minutes(gpu_group_time)}), the old {previous.nodes} x "
                f"{previous.instance_type} is deleted at the end of the update: both run (and are "
                "billed) meanwhile",
            ))
        elif previous.nodes != group.nodes:
            grows = group.nodes > previous.nodes
            # The node group shrinks before Serve hears of the new counts (the RayService waits
            # for the node groups), and EKS terminates whichever nodes it likes, not an idle one:
            # the node may hold an engine that stays, which then loads again elsewhere. Where a
            # phase of this group keeps one engine (always, on the shared group of the reference),
            # that is downtime.
            alone = any(new.phases[p].replicas == 1 for p in group.phases if p in new.phases)
            effects.append(Effect(
                f"GPU node group {name}", Kind.IN_PLACE,
                f"{previous.nodes} -> {group.nodes} x {group.instance_type}, in place"
                + ("" if grows else (
                    ": EKS, not Ray, picks the node to drain, and it may hold an engine that stays; "
                    "that engine then loads the model again on a remaining node "
                    f"({minutes(model_load)}"
                    + (", downtime: a phase on this group keeps a single engine)" if alone
                       else ", at reduced capacity)"))),
                0.0 if grows or not alone else model_load,
            ))
        if previous.root_volume_gb != group.root_volume_gb and previous.instance_type == group.instance_type:
            rolled.append(group)
            effects.append(Effect(
                f"GPU node group {name}", Kind.ROLL_NODES,
                f"root volume {previous.root_volume_gb} -> {group.root_volume_gb} GB is in the "
                "launch template: the group rolls (surge nodes, then drain), restarting its "
                f"engines ({minutes(cold_cluster)})", cold_cluster,
            ))
    for name in sorted(set(new_groups) - set(old_groups)):
        group = new_groups[name]
        replaced.append(group)
        gone = ", ".join(sorted(set(old_groups) - set(new_groups)))
        effects.append(Effect(
            f"GPU node group {name}", Kind.REPLACE_NODES,
            f"a new node group of {group.nodes} x {group.instance_type} ({minutes(gpu_group_time)})"
            + (f"; the old group(s) {gone} are deleted at the end of the update, so both run (and "
               "are billed) meanwhile" if gone else ""),
        ))
    if zone_moved:
        effects.append(Effect(
            "raypd:availabilityZone", Kind.IN_PLACE,
            "allowed onto the stack's second zone only (EKS keeps a cluster's subnets in the zones "
            "it was created in; any other zone is refused before anything changes): the two zones "
            "swap, the EKS cluster's subnets are updated in place (no new control plane), the GPU "
            "node groups move with new subnets (above), and the NAT gateway moves (the old one "
            "first: a few minutes without internet egress from the nodes)",
        ))

    # ---- the RayService: endpoint, Ray cluster, Serve ----
    old_manifest, old_app = _rendered(_in_place(old), old_zone)
    new_manifest, new_app = _rendered(_in_place(new), new_zone)
    rebuild = False
    if (old_manifest["metadata"]["name"], old_manifest["metadata"]["namespace"]) != (
            new_manifest["metadata"]["name"], new_manifest["metadata"]["namespace"]):
        effects.append(Effect(
            "raypd:namespace / raypd:serviceName", Kind.NEW_ENDPOINT,
            "a new RayService under the new name: the old one (and its endpoint address) is deleted "
            f"first, so clients must move and the endpoint is down for {minutes(cold_cluster)}",
            cold_cluster,
        ))
    elif (old_manifest["metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]
          != new_manifest["metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]):
        rebuild = True
        # New nodes, or a new image, mean an image pull (~500 s) before any engine starts.
        on_new_nodes = bool(replaced) or system_replaced or before.image_uri != after.image_uri
        effects.append(Effect(
            "the Ray cluster", Kind.NEW_RAY_CLUSTER,
            "its pods change (image, Ray version, node selection, sizes): KubeRay needs a new Ray "
            "cluster, started "
            + ("on the new nodes" if on_new_nodes else "on the nodes already there")
            + f"; every engine loads the model again ({minutes(cold_cluster if on_new_nodes else warm_cluster)})",
            cold_cluster if on_new_nodes else warm_cluster,
        ))
    elif _serve_code(old_app) != _serve_code(new_app):
        rebuild = True
        # Serve replaces outdated replicas in batches (rolling_update_percentage): a phase with
        # one engine has none serving meanwhile; with several, some serve while others reload,
        # and old prefill engines may pair with new decode engines until the roll ends.
        single = any(phase.replicas == 1 for phase in new.phases.values())
        effects.append(Effect(
            "the Serve application", Kind.RESTART_ENGINES,
            "the engines' settings change (model, engine arguments, parallelism): Ray Serve "
            "redeploys the application and stops each old engine before its successor starts; "
            "with no spare GPU every engine reloads the model "
            + (f"({minutes(model_load)} of downtime: a phase has a single engine)" if single else
               f"({minutes(model_load)} each, in batches: reduced capacity, and old and new "
               "engines serve side by side until the roll ends)"),
            model_load if single else 0.0,
        ))
    if _replicas(old) != _replicas(new):
        changes = ", ".join(f"{name} {old.phases[name].replicas} -> {new.phases[name].replicas}"
                            for name in new.phases
                            if name in old.phases and old.phases[name].replicas != new.phases[name].replicas)
        if changes and not rebuild:
            effects.append(Effect(
                "replicas", Kind.IN_PLACE,
                f"{changes}: in place, no restart of the running engines: Serve adds or stops "
                "engines (a new one serves after its model load), the Ray autoscaler adds or "
                "removes their worker pods",
            ))

    # ---- add-ons and access ----
    if before.kuberay_version != after.kuberay_version:
        effects.append(Effect(
            "raypd:kuberayVersion", Kind.IN_PLACE,
            "the KubeRay CRDs and operator are upgraded in place; the Ray pods keep running "
            "(the operator re-labels the active RayCluster, no restart)",
        ))
    if before.hf_token != after.hf_token:
        effects.append(Effect(
            "raypd:hfToken", Kind.NO_SERVING_EFFECT,
            "the token Secret is updated; running engines keep the token they started with and "
            "use the new one at their next start",
        ))
    if before.api_access_cidrs != after.api_access_cidrs:
        # EKS UpdateClusterConfig (resourcesVpcConfig.publicAccessCidrs): "your cluster continues
        # to function during the update", a few minutes in UPDATING; no new control plane.
        effects.append(Effect(
            "raypd:apiAccessCidrs", Kind.IN_PLACE,
            "the EKS cluster's public endpoint access list is updated in place (a few minutes; the "
            "cluster and serving keep running, nodes use the private endpoint); from then on only "
            "the listed ranges reach the Kubernetes API: include where pulumi up and the web app "
            "run, or the rest of this update and every later one fail",
        ))
    from components.changes.endpoint import endpoint_effects  # it imports this module

    effects += endpoint_effects(before.endpoint, after.endpoint)
    from components.changes.observability import observability_effects  # it imports this module

    metrics = observability_effects(before.observability, after.observability, deployed_outputs)
    effects += metrics
    rebuild = rebuild or any(effect.kind == Kind.NEW_RAY_CLUSTER for effect in metrics)
    if before.admin_role_arns != after.admin_role_arns:
        effects.append(Effect("raypd:adminRoleArns", Kind.NO_SERVING_EFFECT,
                              "EKS access entries are added or removed; nothing restarts"))
    switched = before.upgrade_strategy != after.upgrade_strategy
    if switched and after.upgrade_strategy == "newCluster":
        effects.append(Effect(
            "raypd:upgradeStrategy", Kind.NEW_RAY_CLUSTER,
            "zero-downtime stacks run on generations of GPU node groups: the Ray cluster moves "
            "once, without downtime, onto a first generation (a second set of GPU nodes during the "
            "switch); later disruptive changes do the same",
        ))
    elif switched:
        effects.append(Effect(
            "raypd:upgradeStrategy", Kind.NEW_RAY_CLUSTER,
            "back to in-place: the GPU node groups return to their in-place names (new groups) and "
            f"the RayService is replaced on them: the endpoint is down for {minutes(cold_cluster)}",
            cold_cluster,
        ))
    migration = lockdown_effects(new, deployed_outputs)
    if migration:
        effects += migration
        rebuild = True
        rolled += [group for group in new.groups if group not in rolled]
    superseded += [old_groups[name] for name in sorted(set(old_groups) - set(new_groups))]
    system_lines = ((NodeLine(before.system_nodes.instance_type, before.system_nodes.count,
                              "the old system node group, until it is deleted at the end"),)
                    if system_replaced else ())
    return _finish(effects, old, new, rebuild=rebuild or switched, superseded=tuple(superseded),
                   rolled=tuple(rolled), system_lines=system_lines)


def _finish(effects: list[Effect], old: DeploymentPlan, new: DeploymentPlan, *, rebuild: bool,
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
    surge = SURGE_NODES
    replacement_lines = tuple(_node_line(g, "the old node group, until it is deleted at the end")
                              for g in superseded) + system_lines
    roll_lines = tuple(_node_line(g, "surge nodes of a rolling update", min(surge, g.nodes))
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
    extra = tuple(_node_line(g, "the old Ray cluster's nodes, until the switch") for g in old.groups)
    disruption = max((e.downtime_seconds for e in effects if e.kind in (
        Kind.RESTART_ENGINES, Kind.NEW_RAY_CLUSTER)), default=0.0)
    others = max((e.downtime_seconds for e in effects if e.kind not in (
        Kind.RESTART_ENGINES, Kind.NEW_RAY_CLUSTER)), default=0.0)
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


# ---- the settings table of docs/infrastructure.md (python -m components.changes) ----

# One example change per Contract 1 setting, from the reference deployment (Pulumi.dev.yaml's
# defaults), deployed in us-east-2a. The docs table is this list run through `assess`; a test
# keeps the two equal, so the docs cannot drift from what the preview says.
EXAMPLES: tuple[tuple[str, str, dict[str, Any], dict[str, Any]], ...] = (
    ("raypd:decode.replicas / raypd:prefill.replicas", "1 -> 2", {}, {"raypd:decode": {"replicas": 2}}),
    ("raypd:decode.replicas / raypd:prefill.replicas", "2 -> 1", {"raypd:decode": {"replicas": 2}}, {}),
    ("raypd:model.*", "maxModelLen 4096 -> 8192", {}, {"raypd:model": {"maxModelLen": 8192}}),
    ("raypd:model.id", "served name", {}, {"raypd:model": {"id": "renamed"}}),
    ("raypd:decode.tensorParallelSize", "1 -> 4 on g6e.12xlarge",
     {"raypd:decode": {"instanceType": "g6e.12xlarge"}},
     {"raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}}),
    ("raypd:decode.instanceType", "g6.8xlarge -> g6e.8xlarge", {},
     {"raypd:decode": {"instanceType": "g6e.8xlarge"}}),
    ("raypd:availabilityZone", "us-east-2a -> us-east-2b (the second zone)", {},
     {"raypd:availabilityZone": "us-east-2b"}),
    ("raypd:kubernetesVersion", "1.34 -> 1.35", {"raypd:kubernetesVersion": "1.34"}, {}),
    ("raypd:kubernetesVersion", "1.35 -> 1.34, or two versions up", {}, {"raypd:kubernetesVersion": "1.34"}),
    ("raypd:systemNodes.instanceType", "m7i.xlarge -> m7i.2xlarge", {},
     {"raypd:systemNodes": {"instanceType": "m7i.2xlarge"}}),
    ("raypd:systemNodes.count", "1 -> 2", {}, {"raypd:systemNodes": {"count": 2}}),
    ("raypd:image / raypd:rayVersion", "another image", {}, {"raypd:image": "example.com/ray-llm:2"}),
    ("raypd:kvTransfer.backend", "LIBFABRIC -> UCX", {}, {"raypd:kvTransfer": {"backend": "UCX"}}),
    ("raypd:mode", "disaggregated -> colocated", {}, {"raypd:mode": "colocated"}),
    ("raypd:kuberayVersion", "1.4.0 -> 1.5.1", {}, {"raypd:kuberayVersion": "1.5.1"}),
    ("raypd:namespace / raypd:serviceName", "another name", {}, {"raypd:serviceName": "other"}),
    ("raypd:clusterName / aws:region", "another cluster", {}, {"raypd:clusterName": "other"}),
    ("raypd:hfToken", "a first token", {}, {"raypd:hfToken": "hf_new"}),
    ("raypd:hfToken", "another token", {"raypd:hfToken": "hf_old"}, {"raypd:hfToken": "hf_new"}),
    ("raypd:apiAccessCidrs", "0.0.0.0/0 -> 203.0.113.0/24", {},
     {"raypd:apiAccessCidrs": ["203.0.113.0/24"]}),
    ("raypd:adminRoleArns", "add a role", {}, {"raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/ci"]}),
    ("raypd:upgradeStrategy", "inPlace -> newCluster", {}, {"raypd:upgradeStrategy": "newCluster"}),
    ("raypd:endpoint.scope", "vpc -> internet", {}, {"raypd:endpoint": {
        "scope": "internet", "allowedCidrs": ["203.0.113.0/24"],
        "certificateArn": "arn:aws:acm:us-east-2:123456789012:certificate/0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"}}),
    ("raypd:endpoint.scope", "cluster -> vpc", {"raypd:endpoint": {"scope": "cluster"}}, {}),
    ("raypd:endpoint.allowedCidrs", "the VPC -> 10.0.0.0/8", {},
     {"raypd:endpoint": {"allowedCidrs": ["10.0.0.0/8"]}}),
    ("raypd:endpoint.auth", "apiKey -> none", {}, {"raypd:endpoint": {"auth": "none"}}),
    ("raypd:observability.enabled", "true -> false", {}, {"raypd:observability": {"enabled": False}}),
    ("raypd:observability.prometheusStorageSize", "50Gi -> 100Gi", {},
     {"raypd:observability": {"prometheusStorageSize": "100Gi"}}),
)
DOC_ZONE = "us-east-2a"


def _downtime_words(seconds: float) -> str:
    return "none" if not seconds else minutes(seconds)


def _extra_words(strategy: Strategy) -> str:
    if not strategy.extra_nodes:
        return "none"
    nodes = " + ".join(f"{line.nodes} x {line.instance_type}" for line in strategy.extra_nodes)
    return f"{nodes} for {minutes(strategy.extra_seconds)}"


def settings_table() -> str:
    """The markdown table of every setting: what a change does, its downtime and extra capacity."""
    from components.config.spec import DeploymentSpec
    from components.plan.topology import plan_deployment

    rows = ["| setting | example | what a change does | downtime in place | extra capacity in place "
            "| zero downtime instead |", "|---|---|---|---|---|---|"]
    for setting, example, before, after in EXAMPLES:
        result = assess(plan_deployment(DeploymentSpec.from_config(before, "dev")),
                        plan_deployment(DeploymentSpec.from_config(after, "dev")), DOC_ZONE)
        kinds = ", ".join(dict.fromkeys(e.kind.words for e in result.effects))
        in_place = next((c for c in result.choices if c.name == "inPlace"), result.chosen)
        zero = next((c for c in result.choices if c.name == "newCluster"), None)
        alternative = (f"no downtime; {_extra_words(zero)} (~${zero.extra_usd:g})"
                       if zero is not None and zero.extra_usd is not None else
                       "-" if zero is None else f"no downtime; {_extra_words(zero)}")
        rows.append(f"| `{setting}` | {example} | {kinds} | {_downtime_words(in_place.downtime_seconds)} "
                    f"| {_extra_words(in_place)} | {alternative} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # python -m components.changes: the docs table
    print(settings_table(), end="")
