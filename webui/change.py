"""What a change to a deployment means, before anything runs: pure functions, dicts in, dicts out.

Three questions a person asks before pressing Deploy on a changed deployment:
- which settings changed (`config_diff`: old -> new per Contract 1 key, nested keys dotted);
- which resources get created, updated, replaced or deleted (`plan_diff`, for the offline engine,
  from the last plan and the new one; the real engine reports Pulumi's own preview steps);
- what that does to serving (`consequences`: the RayService replaced means the endpoint is down for
  the model load; a Serve-only change is an in-place update with no downtime).

Replacement offline is judged from the resource options the program registers (`replaceOnChanges`,
as the plan records them) and, for provider resources, from the inputs their providers replace on
(`PROVIDER_REPLACES`, from the pulumi-aws and pulumi-eks schemas): an approximation of what the
real preview decides, said so on the page.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from components.durations import TYPICAL_SECONDS

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
NODE_GROUP = "eks:index:ManagedNodeGroup"
CLUSTER = "eks:index:Cluster"
# Inputs whose change makes the provider replace the resource (create-only properties).
PROVIDER_REPLACES: dict[str, tuple[str, ...]] = {
    "aws:ec2/subnet:Subnet": ("cidrBlock", "availabilityZone", "vpcId"),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/natGateway:NatGateway": ("subnetId", "allocationId"),
    CLUSTER: ("name", "vpcId", "privateSubnetIds", "publicSubnetIds", "subnetIds"),
    NODE_GROUP: ("instanceTypes", "amiType", "diskSize", "subnetIds", "nodeRoleArn", "capacityType",
                 "enableEfaSupport", "placementGroupAvailabilityZone", "nodeGroupName"),
    "kubernetes:core/v1:Namespace": ("metadata.name",),
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
}
CHANGE_OPS = ("create", "update", "replace", "delete")


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            for inner, item in value.items():
                flat[f"{key}.{inner}"] = item
        else:
            flat[key] = value
    return flat


def config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Settings that differ, as {key, old, new}; a key absent on one side reads None there."""
    before, after = _flatten(old), _flatten(new)
    return [
        {"key": key, "old": before.get(key), "new": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def _changed_keys(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        path = f"{prefix}{key}"
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            keys.extend(_changed_keys(a, b, f"{path}."))
        else:
            keys.append(path)
    return keys


def _replaces(resource: Mapping[str, Any], changed: list[str]) -> bool:
    triggers = list(resource.get("replaceOnChanges") or []) + list(PROVIDER_REPLACES.get(resource["type"], ()))
    return any(key == trigger or key.startswith(trigger + ".") for key in changed for trigger in triggers)


def plan_diff(old_plan: Mapping[str, Any], new_plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per resource of either plan: {type, name, op (create|update|replace|delete|same), keys}.

    New-plan order first (what the update walks), then what only the old plan had (deletes).
    """
    old = {r["name"]: r for r in old_plan.get("resources", []) if isinstance(r, Mapping)}
    steps: list[dict[str, Any]] = []
    seen: set[str] = set()
    for resource in new_plan.get("resources", []):
        if not isinstance(resource, Mapping):
            continue
        name = resource["name"]
        seen.add(name)
        before = old.get(name)
        if before is None or before.get("type") != resource["type"]:
            steps.append({"type": resource["type"], "name": name, "op": "create", "keys": []})
            continue
        changed = _changed_keys(before.get("inputs") or {}, resource.get("inputs") or {})
        op = "same" if not changed else ("replace" if _replaces(resource, changed) else "update")
        steps.append({"type": resource["type"], "name": name, "op": op, "keys": changed})
    for name, resource in old.items():
        if name not in seen:
            steps.append({"type": resource["type"], "name": name, "op": "delete", "keys": []})
    return steps


def change_counts(steps: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in steps:
        counts[step["op"]] = counts.get(step["op"], 0) + 1
    return counts


def _minutes(type_: str) -> int:
    return max(1, round(TYPICAL_SECONDS.get(type_, 600) / 60))


def consequences(steps: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the steps mean for people using the endpoint, most disruptive first."""
    by_op: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for step in steps:
        by_op.setdefault((step["type"], step["op"]), []).append(step)
    notes: list[str] = []
    if by_op.get((CLUSTER, "replace")):
        notes.append(f"the EKS cluster is replaced: everything on it is created again (about "
                     f"{_minutes(CLUSTER)} min for the cluster alone); the endpoint is down meanwhile")
    if by_op.get((NODE_GROUP, "replace")):
        names = ", ".join(s["name"] for s in by_op[(NODE_GROUP, "replace")])
        notes.append(f"node groups are replaced ({names}): their nodes are drained and new ones "
                     "started; engines on them stop until the new nodes are ready")
    if by_op.get((RAYSERVICE, "replace")):
        notes.append(f"the RayService is replaced (its Ray cluster changes): the endpoint is down for "
                     f"roughly the model load time (about {_minutes(RAYSERVICE)} min)")
    elif by_op.get((RAYSERVICE, "update")):
        notes.append("an in-place Serve update: KubeRay rolls the Serve application on the running "
                     "Ray cluster; no downtime")
    if by_op.get((NODE_GROUP, "update")):
        notes.append("node groups change in place (size or labels): no replacement")
    created = sum(len(v) for (t, op), v in by_op.items() if op == "create")
    deleted = sum(len(v) for (t, op), v in by_op.items() if op == "delete")
    if created:
        notes.append(f"{created} resource(s) created")
    if deleted:
        notes.append(f"{deleted} resource(s) deleted")
    if not any(op in CHANGE_OPS for (_, op) in by_op):
        notes.append("no resource changes")
    return notes


def cost_change(old_usd: Optional[float], new_usd: Optional[float]) -> dict[str, Optional[float]]:
    return {"old": old_usd, "new": new_usd,
            "delta": None if old_usd is None or new_usd is None else round(new_usd - old_usd, 4)}
