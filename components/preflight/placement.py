"""Where the nodes can run (components.preflight): the `instance-types`, `efa-support`,
`zone-offering` and `eks-zone` checks, and the pure rules they apply (the program's zone choice,
EKS-excluded zones, GPUs per node, EFA), which tests call without AWS."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from components.config.checks import Check
from components.config.spec import REGION_KEY, DeploymentSpec
from components.plan.topology import DeploymentPlan
from components.plan.zones import (
    AZ_FIELD,
    EKS_UNSUPPORTED_ZONE_IDS,
    PreviousZones,
    eks_usable,
    gpu_instance_types,
    is_regular_zone,
    pick_gpu_zone,
    pick_second_zone,
    previous_zones_from_tags,
    zones_offering_all,
)
from components.preflight.aws import call
from components.preflight.context import TITLES, Context


def second_zone(region: str, zone_names: Iterable[str], gpu_zone: str) -> Optional[str]:
    """The program's second cluster subnet zone on a first deploy (components.plan.zones'
    pick_second_zone): the first other regular AZ EKS can use. `zone_names`: names, or a
    name -> zone id mapping (then EKS's unsupported zone ids are left out)."""
    pairs = (list(zone_names.items()) if isinstance(zone_names, Mapping)
             else [(name, "") for name in zone_names])
    return pick_second_zone(gpu_zone, None, eks_usable(region, pairs))


def choose_gpu_zone(
    plan: DeploymentPlan, offerings: Iterable[tuple[str, str]], usable: Optional[Sequence[str]] = None,
    previous: Optional[PreviousZones] = None,
) -> tuple[Optional[str], list[str]]:
    """(the GPU AZ the program would use, every AZ offering all GPU types), by the program's own
    rule (components.plan.zones.pick_gpu_zone): the configured raypd:availabilityZone (None when it
    lacks a type: the program would stop), else the zone the stack already uses, else the first
    zone offering every GPU type where EKS can place cluster subnets (`usable`; None: not known)."""
    spec = plan.spec
    zones = zones_offering_all(spec.region, offerings, gpu_instance_types(plan))
    if spec.availability_zone is not None:
        return (spec.availability_zone if spec.availability_zone in zones else None), zones
    zone = pick_gpu_zone(None, previous, zones, zones if usable is None else usable)
    return zone, zones



def gpu_shortfalls(spec: DeploymentSpec, types: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Phases needing more GPUs per node than DescribeInstanceTypes reports for their type."""
    problems = []
    for phase_name, phase in spec.phases.items():
        info = types.get(phase.instance_type)
        if info is None:
            continue
        gpus = sum(g.get("Count", 0) for g in info.get("GpuInfo", {}).get("Gpus", []))
        if gpus < phase.gpus_per_replica:
            problems.append(
                f"{phase.instance_type} has {gpus} GPU(s) per EC2, but raypd:{phase_name} needs "
                f"tensorParallelSize x pipelineParallelSize = {phase.gpus_per_replica}"
            )
    return problems


def efa_missing(types: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Instance types whose DescribeInstanceTypes answer says no EFA."""
    return sorted(name for name, info in types.items()
                  if not info.get("NetworkInfo", {}).get("EfaSupported", False))


def _all_types(plan: DeploymentPlan) -> list[str]:
    return sorted({*gpu_instance_types(plan), plan.spec.system_nodes.instance_type})


def _type_keys(spec: DeploymentSpec, names: Iterable[str]) -> str:
    """The config keys that chose these instance types, e.g. "raypd:prefill.instanceType"."""
    wanted = set(names)
    keys = [f"raypd:{p}.instanceType" for p, ph in spec.phases.items() if ph.instance_type in wanted]
    if spec.system_nodes.instance_type in wanted:
        keys.append("raypd:systemNodes.instanceType")
    return ", ".join(keys)


def check_instance_types(ctx: Context) -> None:
    spec, cid, title = ctx.spec, "instance-types", TITLES["instance-types"]
    names = _all_types(ctx.plan)
    found, unknown = call(lambda: ctx.aws.instance_types(names))
    ctx.types = found
    in_region = {t for t, _ in call(lambda: ctx.aws.offerings("region", names))}
    not_offered = [n for n in names if n in found and n not in in_region]
    problems = [f"{n} does not exist in EC2 (InvalidInstanceType)" for n in unknown]
    problems += [f"{n} is not offered in {spec.region}" for n in not_offered]
    shortfalls = gpu_shortfalls(spec, found)
    problems += shortfalls
    if problems:
        bad = [*unknown, *not_offered]
        fixes = []
        if bad:
            fixes.append(f"pick instance types offered in {spec.region} ({_type_keys(spec, bad)}) or "
                         f"another {REGION_KEY}")
        short_phases = [p for p, ph in spec.phases.items()
                        if any(f"raypd:{p} needs" in line for line in shortfalls)]
        for phase_name in short_phases:
            fixes.append(f"lower raypd:{phase_name}.tensorParallelSize x pipelineParallelSize to the "
                         f"GPUs EC2 reports, or pick a type with more GPUs in "
                         f"raypd:{phase_name}.instanceType")
        ctx.add(Check.failed(cid, title, "; ".join(problems), "; ".join(fixes)))
        return
    parts = []
    for name in names:
        info = found[name]
        gpus = sum(g.get("Count", 0) for g in info.get("GpuInfo", {}).get("Gpus", []))
        vcpus = info.get("VCpuInfo", {}).get("DefaultVCpus")
        parts.append(f"{name} ({gpus} GPU, {vcpus} vCPU)" if gpus else f"{name} ({vcpus} vCPU)")
    per_phase = ", ".join(f"{p} needs {ph.gpus_per_replica}" for p, ph in spec.phases.items())
    ctx.add(Check.passed(
        cid, title, f"offered in {spec.region}: {', '.join(parts)}; GPUs per replica: {per_phase}",
    ))


def check_efa(ctx: Context) -> None:
    spec, cid, title = ctx.spec, "efa-support", TITLES["efa-support"]
    if spec.mode != "disaggregated":
        ctx.add(Check.skipped(cid, title, "colocated mode: no KV transfer between nodes"))
        return
    if spec.kv_transfer.backend != "LIBFABRIC":
        ctx.add(Check.skipped(cid, title, f"raypd:kvTransfer.backend is {spec.kv_transfer.backend}: "
                                          "KV transfer does not use EFA"))
        return
    gpu_types = {name: ctx.types[name] for name in gpu_instance_types(ctx.plan) if name in ctx.types}
    if not gpu_types:
        ctx.add(Check.skipped(cid, title, "no DescribeInstanceTypes answer for the GPU types"))
        return
    missing = efa_missing(gpu_types)
    if missing:
        ctx.add(Check.failed(cid, title, f"EC2 reports no EFA support for {', '.join(missing)}",
                             f"pick EFA-capable GPU types (e.g. g6.8xlarge, p5.48xlarge) in "
                             f"{_type_keys(spec, missing)}, or set raypd:kvTransfer.backend UCX (slow)"))
        return
    evidence = ", ".join(
        f"{name} (EfaSupported, up to "
        f"{info.get('NetworkInfo', {}).get('EfaInfo', {}).get('MaximumEfaInterfaces', '?')} interface(s))"
        for name, info in sorted(gpu_types.items())
    )
    ctx.add(Check.passed(cid, title, evidence))


def check_zone_offering(ctx: Context) -> None:
    spec, cid, title = ctx.spec, "zone-offering", TITLES["zone-offering"]
    types = gpu_instance_types(ctx.plan)
    offerings = call(lambda: ctx.aws.offerings("availability-zone", types))
    usable = eks_usable(spec.region, call(ctx.aws.zones))
    previous = previous_zones_from_tags(
        call(lambda: ctx.aws.stack_vpc_tags(spec.stack, spec.effective_cluster_name)))
    zone, all_zones = choose_gpu_zone(ctx.plan, offerings, usable, previous)
    listed = ", ".join(all_zones) if all_zones else "none"
    if previous is not None and previous.gpu:
        ctx.deployed_zone = previous.gpu
    if (spec.availability_zone is not None and previous is not None and previous.gpu and previous.second
            and spec.availability_zone not in (previous.gpu, previous.second)):
        ctx.add(Check.failed(
            cid, title,
            f"{spec.availability_zone} (raypd:availabilityZone) is outside the zones this stack's EKS "
            f"cluster was created in ({previous.gpu}, {previous.second}): EKS accepts new cluster "
            "subnets only in those (aws/containers-roadmap#2330), so the program refuses the move",
            f"set {AZ_FIELD} to {previous.second} (the zones swap) or back to {previous.gpu}; another "
            "zone needs a new stack",
        ))
        return
    if spec.availability_zone is not None:
        if zone is None:
            there = {t for t, z in offerings if z == spec.availability_zone}
            lacking = [t for t in types if t not in there]
            ctx.add(Check.failed(
                cid, title,
                f"{spec.availability_zone} (raypd:availabilityZone) does not offer {', '.join(lacking)}; "
                f"zones offering all of {', '.join(types)}: {listed}",
                f"set {AZ_FIELD} to one of: {listed}, or leave it unset" if all_zones
                else f"pick GPU instance types offered together in one zone of {spec.region}",
            ))
            return
        ctx.gpu_zone = zone
        ctx.add(Check.passed(cid, title, f"{zone} (set by {AZ_FIELD}) offers {', '.join(types)}"))
        return
    if zone is None:
        def where(instance_type: str) -> str:
            zones = sorted(z for t, z in offerings if t == instance_type and is_regular_zone(spec.region, z))
            return ", ".join(zones) or "no zone"

        per_type = "; ".join(f"{t}: {where(t)}" for t in types)
        ctx.add(Check.failed(
            cid, title, f"no zone of {spec.region} offers all of {', '.join(types)} ({per_type})",
            "the GPU node groups share one zone (EFA cannot cross zones): pick GPU instance types "
            f"offered together, or another {REGION_KEY}",
        ))
        return
    ctx.gpu_zone = zone
    if previous is not None and previous.gpu == zone:
        why = "the zone this stack already runs in; it never moves on its own"
        if zone not in all_zones:
            ctx.add(Check.warned(
                cid, title, f"{zone}, where this stack's GPU nodes run, no longer offers all of "
                f"{', '.join(types)}; zones that do: {listed}",
                f"new nodes may fail to launch there; set {AZ_FIELD} to move on purpose (the GPU "
                "node groups and subnets are then replaced)"))
            return
    else:
        why = f"the first zone offering {', '.join(types)} where EKS can place the cluster"
    ctx.add(Check.passed(
        cid, title, f"{zone} ({why}; set {AZ_FIELD} to pin it); all zones offering them: {listed}",
    ))


def check_eks_zone(ctx: Context) -> None:
    spec, cid, title = ctx.spec, "eks-zone", TITLES["eks-zone"]
    zones = call(ctx.aws.zones)
    ids = dict(zones)
    excluded_ids = EKS_UNSUPPORTED_ZONE_IDS.get(spec.region, frozenset())
    excluded = sorted(f"{n} ({i})" for n, i in zones if i in excluded_ids)
    excluded_note = (
        f"zones EKS does not support here: {', '.join(excluded)} (UnsupportedAvailabilityZoneException)"
        if excluded else f"no zone of {spec.region} is on EKS's unsupported list"
    )
    usable = eks_usable(spec.region, zones)
    # A configured zone is judged even when it lacks a GPU type (zone-offering fails then): a zone
    # EKS is known to refuse is a failure of its own, with its own remedy.
    gpu_zone = ctx.gpu_zone or spec.availability_zone
    if gpu_zone is None:
        ctx.add(Check.skipped(cid, title, f"no GPU zone to judge (see zone-offering); {excluded_note}"))
        return
    second = second_zone(spec.region, ids, gpu_zone)
    problems = []
    if gpu_zone not in ids:
        problems.append(f"GPU zone {gpu_zone} is not an available zone of this account")
    elif gpu_zone not in usable:
        problems.append(f"GPU zone {gpu_zone} is {ids[gpu_zone]}, where EKS cannot place cluster subnets")
    if second is None:
        problems.append(f"{spec.region} has no second availability zone; EKS needs subnets in two")
    elif second not in usable:
        problems.append(f"the second cluster subnet zone would be {second} ({ids[second]}), which EKS "
                        "does not support")
    if problems:
        ctx.add(Check.failed(
            cid, title, "; ".join(problems) + f"; {excluded_note}",
            f"set {AZ_FIELD} to a zone that offers the GPU types and that EKS supports "
            f"(EKS-supported zones here: {', '.join(usable)})" if len(usable) >= 2
            else f"pick another {REGION_KEY}: EKS needs two supported zones",
        ))
        return
    assert second is not None  # a missing second zone is one of the problems above
    ctx.add(Check.passed(
        cid, title,
        f"GPU zone {gpu_zone} ({ids[gpu_zone]}) and second zone {second} ({ids[second]}) are EKS "
        f"zones; {excluded_note}",
    ))
