"""A change to a deployment as resource steps, and what they mean, before anything runs: pure
functions, dicts in, dicts out (components.changes judges the settings; this reads the steps).

Three questions a person asks before pressing Deploy on a changed deployment:
- which settings changed (`config_diff`: old -> new per Contract 1 key, nested keys dotted);
- which resources get created, updated, replaced or deleted: the steps. The real engine reports
  Pulumi's own preview steps; the offline engine derives them from the last plan and the new one
  (`plan_diff`), deciding replace or update the way Pulumi does (components.changes.pulumi_diff);
- what that does to serving (`consequences`), read from the steps through ONE table (`MEANINGS`)
  whatever engine made them, plus the settings-level assessment (components.changes) for what a
  RayService update does to the engines, which no resource step can tell.

Pulumi reports a replacement on the resource that is replaced, which for pulumi-eks's remote
components is a child: `eks:index:ManagedNodeGroup` and `eks:index:Cluster` only ever `update` or
stay `same`, while `aws:eks/nodeGroup:NodeGroup`, `aws:ec2/launchTemplate:LaunchTemplate` and
`aws:eks/cluster:Cluster` under them carry the `replace`. Under Pulumi's mock runtime the offline
plan sees the components alone (their children are created in the eks provider), so `plan_diff`
expands a component's changed inputs into the child steps a real preview reports
(`COMPONENT_CHILDREN`, from pulumi-eks's nodejs/eks/nodes/nodegroup.ts and cluster.ts and the
pulumi-aws resources' create-only inputs). From there both engines are read by the same table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from components.changes.pulumi_diff import as_sets, replace_paths, step_keys
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
MNG = "eks:index:ManagedNodeGroup"
EKS_CLUSTER = "eks:index:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_CLUSTER = "aws:eks/cluster:Cluster"
GPU_COMPONENT = "raypd:cluster:GpuNodeGroup"
CHANGE_OPS = ("create", "update", "replace", "delete")

# Inputs whose change makes the provider replace a (non-Kubernetes) resource: create-only
# properties in the pulumi-aws schema (terraform-provider-aws ForceNew).
PROVIDER_REPLACES: dict[str, tuple[str, ...]] = {
    "aws:ec2/subnet:Subnet": ("cidrBlock", "availabilityZone", "vpcId"),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/natGateway:NatGateway": ("subnetId", "allocationId"),
    "aws:iam/role:Role": ("name",),
    "aws:eks/addon:Addon": ("addonName", "clusterName"),
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
}


# pulumi-kubernetes replaces an object whose name or namespace changes, and these fields of some
# kinds (provider/pkg/provider/diff.go `forceNewProperties`: metadataForceNewProperties, `job`).
KUBERNETES_REPLACES = ("metadata.name", "metadata.namespace")
KUBERNETES_KIND_REPLACES: dict[str, tuple[str, ...]] = {
    "kubernetes:batch/v1:Job": ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
}


def replace_triggers(resource: Mapping[str, Any]) -> list[str]:
    """Every path whose change replaces `resource`: its replaceOnChanges option, and what its
    provider replaces on."""
    kind = str(resource.get("type", ""))
    triggers = list(resource.get("replaceOnChanges") or []) + list(PROVIDER_REPLACES.get(kind, ()))
    if kind.startswith("kubernetes:") and not kind.startswith("kubernetes:helm.sh/"):
        triggers += list(KUBERNETES_REPLACES) + list(KUBERNETES_KIND_REPLACES.get(kind, ()))
    return triggers


@dataclass(frozen=True)
class ChildRule:
    """Changed component inputs -> the child step a real preview reports for them."""

    keys: tuple[str, ...]
    child: str
    op: str


# pulumi-eks ManagedNodeGroup (nodes/nodegroup.ts createManagedNodeGroup): raypd sets
# enableIMDSv2, so pulumi-eks always builds its own launch template `<name>-launchTemplate` and
# moves diskSize into it (block device mappings); a new launch template version is a rolling update
# of the aws.eks.NodeGroup `<name>`. The NodeGroup's create-only inputs replace it (create first).
# The version follows the cluster's when unset (raypd leaves it unset).
COMPONENT_CHILDREN: dict[str, tuple[ChildRule, ...]] = {
    MNG: (
        ChildRule(("instanceTypes", "amiType", "subnetIds", "nodeRoleArn", "capacityType",
                   "nodeGroupName", "nodeGroupNamePrefix", "enableEfaSupport",
                   "placementGroupAvailabilityZone", "clusterName"), NODE_GROUP, "replace"),
        ChildRule(("diskSize", "enableImdSv2", "userData", "kubeletExtraArgs"), LAUNCH_TEMPLATE,
                  "update"),
        ChildRule(("diskSize", "enableImdSv2", "userData", "kubeletExtraArgs", "version",
                   "releaseVersion"), NODE_GROUP, "update"),
        ChildRule(("scalingConfig", "labels", "taints", "tags"), NODE_GROUP, "update"),
    ),
    # pulumi-eks Cluster: the aws.eks.Cluster's name and VPC are create-only; its version, subnets,
    # endpoint access list (vpcConfig, UpdateClusterConfig), control-plane logs and upgrade policy
    # update in place (EKS: "your cluster continues to function during the update").
    EKS_CLUSTER: (
        ChildRule(("name", "vpcId"), AWS_CLUSTER, "replace"),
        ChildRule(("version", "privateSubnetIds", "publicSubnetIds", "subnetIds",
                   "endpointPrivateAccess", "endpointPublicAccess", "publicAccessCidrs",
                   "enabledClusterLogTypes", "upgradePolicy", "tags"), AWS_CLUSTER, "update"),
    ),
}
# Inputs the children hold as sets (terraform-provider-aws TypeSet: aws_eks_node_group.subnet_ids,
# aws_eks_cluster vpc_config.subnet_ids): a new order alone is no change to the child.
SET_INPUTS: dict[str, tuple[str, ...]] = {
    MNG: ("subnetIds", "instanceTypes"),
    EKS_CLUSTER: ("subnetIds", "privateSubnetIds", "publicSubnetIds"),
}
# NodeGroup inputs whose update rolls the nodes (new launch template version, new AMI release or
# Kubernetes version): EKS starts surge nodes, then drains the old ones. Others change in place.
ROLLING_KEYS = ("version", "releaseVersion", "launchTemplate", "diskSize", "amiType")
SCALING_KEYS = ("scalingConfig",)


# ---- settings ----

def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf setting under its dotted key, at any depth: a phase's autoscaling block reads
    `raypd:decode.autoscaling.maxReplicas`, as its field on the change form is named."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Settings that differ, as {key, old, new}; a key absent on one side reads None there."""
    before, after = _flatten(old), _flatten(new)
    return [
        {"key": key, "old": before.get(key), "new": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


# ---- steps ----

def chain_of(urn: str) -> tuple[str, ...]:
    """The types from the stack down to a resource, from its URN:
    `urn:pulumi:dev::raypd::raypd:cluster:GpuNodeGroup$eks:index:ManagedNodeGroup$aws:eks/nodeGroup:NodeGroup::x`
    -> ("raypd:cluster:GpuNodeGroup", "eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")."""
    parts = urn.split("::")
    return tuple(parts[2].split("$")) if len(parts) >= 4 else ()


def _chains(resources: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """name -> types from the top component down to it, from the plan's `parent` names."""
    by_name = {str(r["name"]): r for r in resources}

    def chain(name: str, depth: int = 0) -> tuple[str, ...]:
        resource = by_name[name]
        parent = resource.get("parent")
        if parent is None or parent not in by_name or depth > 32:
            return (str(resource["type"]),)
        return chain(str(parent), depth + 1) + (str(resource["type"]),)

    return {name: chain(name) for name in by_name}


def _top(path: str) -> str:
    """The top-level input of a property path (`instanceTypes[0]` -> `instanceTypes`)."""
    return re.split(r"[.\[]", path, maxsplit=1)[0]


def _expand(step: dict[str, Any], old_inputs: Any, new_inputs: Any) -> list[dict[str, Any]]:
    """A component's update as the child steps a real preview reports (module docstring)."""
    rules = COMPONENT_CHILDREN.get(step["type"])
    if not rules or step["op"] != "update":
        return [step]
    set_keys = SET_INPUTS.get(step["type"], ())
    child_keys = step_keys(as_sets(old_inputs, set_keys), as_sets(new_inputs, set_keys))
    children: list[dict[str, Any]] = [step]
    seen: set[str] = set()
    for rule in rules:
        if rule.child in seen:
            continue
        hits = [key for key in child_keys if _top(key) in rule.keys]
        if hits:
            seen.add(rule.child)
            children.append({"type": rule.child, "name": step["name"], "op": rule.op, "keys": hits,
                             "chain": tuple(step.get("chain") or ()) + (rule.child,),
                             "expanded": True})
    return children


def plan_diff(old_plan: Mapping[str, Any], new_plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per resource of either plan: {type, name, op (create|update|replace|delete|same), keys,
    chain}, with pulumi-eks components expanded into their children's steps.

    New-plan order first (what the update walks), then what only the old plan had (deletes).
    Replace or update is decided as the engine decides it (components.changes.pulumi_diff): the leaf paths
    that changed, against the resource's replaceOnChanges paths and its provider's create-only
    inputs.
    """
    old_resources = [r for r in old_plan.get("resources", []) if isinstance(r, Mapping)]
    new_resources = [r for r in new_plan.get("resources", []) if isinstance(r, Mapping)]
    old = {r["name"]: r for r in old_resources}
    chains = {**_chains(old_resources), **_chains(new_resources)}
    steps: list[dict[str, Any]] = []
    seen: set[str] = set()
    for resource in new_resources:
        name = resource["name"]
        seen.add(name)
        before = old.get(name)
        chain = chains.get(name, (resource["type"],))
        if before is None or before.get("type") != resource["type"]:
            steps.append({"type": resource["type"], "name": name, "op": "create", "keys": [],
                          "chain": chain})
            continue
        old_inputs, new_inputs = before.get("inputs") or {}, resource.get("inputs") or {}
        keys = step_keys(old_inputs, new_inputs)
        replacing = replace_paths(old_inputs, new_inputs, replace_triggers(resource))
        op = "same" if not keys else ("replace" if replacing else "update")
        steps.extend(_expand({"type": resource["type"], "name": name, "op": op, "keys": keys,
                              "chain": chain}, old_inputs, new_inputs))
    for name, resource in old.items():
        if name not in seen:
            steps.append({"type": resource["type"], "name": name, "op": "delete", "keys": [],
                          "chain": chains.get(name, (resource["type"],))})
    return steps


def change_counts(steps: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Counted like Pulumi's summary: resources the program registers, not expanded children."""
    counts: dict[str, int] = {}
    for step in steps:
        if step.get("expanded"):
            continue
        counts[step["op"]] = counts.get(step["op"], 0) + 1
    return counts


# ---- what the steps mean ----

def _minutes(seconds: float) -> str:
    return f"about {max(1, round(seconds / 60))} min"


def _is_gpu(step: Mapping[str, Any]) -> bool:
    return GPU_COMPONENT in tuple(step.get("chain") or ())


def _group_name(step: Mapping[str, Any]) -> str:
    return str(step["name"]).removesuffix("-group")


def _meaning(step: Mapping[str, Any]) -> Optional[str]:
    """The one table: (type, op, what changed) -> what it means, for both engines' steps."""
    kind, op = step["type"], step["op"]
    keys = {_top(str(k)) for k in step.get("keys") or []}
    if kind == AWS_CLUSTER:
        if op == "replace":
            return "cluster-replaced"
        if op == "update" and "version" in keys:
            return "kubernetes-upgrade"
        if op == "update":
            return "cluster-updated"
    if kind == NODE_GROUP:
        role = "gpu" if _is_gpu(step) else "system"
        if op == "replace":
            return f"{role}-nodes-replaced"
        if op == "update" and keys & set(ROLLING_KEYS):
            return f"{role}-nodes-roll"
        if op == "update" and keys & set(SCALING_KEYS):
            return f"{role}-nodes-resized"
        if op == "update":
            return "nodes-relabelled"
        if op == "create" and role == "gpu":
            return "gpu-nodes-created"
        if op == "delete" and role == "gpu":
            return "gpu-nodes-deleted"
    if kind == RAYSERVICE:
        return {"replace": "rayservice-replaced", "update": "rayservice-updated"}.get(op)
    return None


def consequences(steps: Iterable[Mapping[str, Any]],
                 assessment: Optional[Mapping[str, Any]] = None) -> list[str]:
    """What the steps mean for people using the endpoint, most disruptive first.

    `assessment` (components.changes, as_dict) says what a RayService update does to the engines
    (restart, scale, nothing), which the step alone cannot: both engines report it as `update`.
    """
    steps = list(steps)
    found: dict[str, list[Mapping[str, Any]]] = {}
    for step in steps:
        meaning = _meaning(step)
        if meaning is not None:
            found.setdefault(meaning, []).append(step)
    names = {m: ", ".join(dict.fromkeys(_group_name(s) for s in found[m])) for m in found}
    times = CHANGE_TIMES
    cluster_s = TYPICAL_SECONDS[EKS_CLUSTER]
    gpu_group_s = TYPICAL_SECONDS[f"{MNG}[gpu]"]
    system_group_s = TYPICAL_SECONDS[MNG]
    rayservice_s = TYPICAL_SECONDS[RAYSERVICE]
    notes: list[str] = []
    if "cluster-replaced" in found:
        notes.append(f"the EKS cluster is replaced: everything on it is created again ({_minutes(cluster_s)} "
                     "for the control plane alone); the endpoint is down meanwhile")
    if "kubernetes-upgrade" in found:
        notes.append(
            f"Kubernetes upgrade: EKS upgrades the control plane ({_minutes(times['control-plane-upgrade'].seconds)}), "
            "then every node group rolls (surge nodes first, then the old ones drain), the system "
            "node with the Ray head, the KubeRay operator and CoreDNS included: a full outage until "
            f"the Ray cluster is back ({_minutes(times['node-group-roll'].seconds + rayservice_s)}); "
            "the GPU surge nodes need spare vCPU quota and free capacity in the placement group")
    if "gpu-nodes-replaced" in found:
        notes.append(
            f"GPU node groups are replaced ({names['gpu-nodes-replaced']}): the new group is created "
            f"first ({_minutes(gpu_group_s)}) and the old one deleted at the end of the update, so "
            "both run (and are billed) meanwhile; the engines move to the new nodes with the Ray "
            f"cluster and load the model there ({_minutes(rayservice_s)}, image pull included)")
    if "gpu-nodes-created" in found and "gpu-nodes-deleted" in found:
        notes.append(
            f"new GPU node groups ({names['gpu-nodes-created']}) start before the old ones "
            f"({names['gpu-nodes-deleted']}) are deleted at the end of the update: both run (and are "
            f"billed) meanwhile ({_minutes(gpu_group_s)} for the new nodes)")
    if "system-nodes-replaced" in found:
        notes.append(f"the system node group is replaced ({_minutes(system_group_s)} for the new one); "
                     "the Ray head, the KubeRay operator, CoreDNS and the endpoint's proxy (a single "
                     "pod: the endpoint is down while it moves) go to it")
    for role in ("gpu", "system"):
        if f"{role}-nodes-roll" in found and "kubernetes-upgrade" not in found:
            notes.append(
                f"{'GPU' if role == 'gpu' else 'system'} node groups roll ({names[f'{role}-nodes-roll']}): "
                "EKS starts surge nodes, then drains the old ones one by one; "
                + ("each engine restarts on a new node" if role == "gpu"
                   else "the Ray head restarts with its node: a full outage until the Ray cluster is back"))
    if "rayservice-replaced" in found:
        notes.append(f"the RayService is replaced (its Ray cluster changes): the old one is deleted "
                     f"first, and the endpoint is down until the new one is Ready ({_minutes(rayservice_s)} "
                     "on new nodes, less where the image is already cached)")
    elif "rayservice-updated" in found:
        notes.extend(_rayservice_update(assessment))
    for role in ("gpu", "system"):
        if f"{role}-nodes-resized" in found:
            notes.append(f"{'GPU' if role == 'gpu' else 'system'} node groups resize in place "
                         f"({names[f'{role}-nodes-resized']}): no replacement")
    if "nodes-relabelled" in found:
        notes.append(f"node group labels or tags change in place ({names['nodes-relabelled']})")
    top = [s for s in steps if not s.get("expanded")]
    created = sum(1 for s in top if s["op"] == "create")
    deleted = sum(1 for s in top if s["op"] == "delete")
    if created:
        notes.append(f"{created} resource(s) created")
    if deleted:
        notes.append(f"{deleted} resource(s) deleted")
    if not any(s["op"] in CHANGE_OPS for s in steps):
        notes.append("no resource changes")
    return notes


def _rayservice_update(assessment: Optional[Mapping[str, Any]]) -> list[str]:
    """An in-place RayService update, in the words of the settings assessment when there is one."""
    if assessment is None:
        return ["the RayService is updated in place: a change of the engines' settings restarts "
                f"each engine ({_minutes(CHANGE_TIMES['engine-restart'].seconds)} of downtime, no "
                "spare GPU), a change of replica counts alone does not"]
    serving = [e for e in assessment.get("effects") or []
               if e.get("subject") in ("the Serve application", "the Ray cluster", "replicas",
                                       "raypd:upgradeStrategy")]
    if not serving:
        return ["the RayService is updated in place (labels or wait settings): no restart of the "
                "running engines"]
    return [f"{e['subject']}: {e['detail']}" for e in serving]


def cost_change(old_usd: Optional[float], new_usd: Optional[float]) -> dict[str, Optional[float]]:
    return {"old": old_usd, "new": new_usd,
            "delta": None if old_usd is None or new_usd is None else round(new_usd - old_usd, 4)}
