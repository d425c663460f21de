"""The quota checks (components.preflight): `vcpu-quota` (does the On-Demand vCPU quota cover the
nodes, counting what else runs) and `update-headroom` (the extra nodes of this update's peak, from
the change preview, or of a later rolling update). Nodes and quota codes are counted with the one
capacity model, components.plan.capacity."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from functools import partial
from typing import Iterable, Optional

from botocore.exceptions import ClientError

from components.changes.assess import assess
from components.changes.effects import STRATEGY_WORDS
from components.config import catalogue
from components.config.checks import Check
from components.plan.capacity import (
    DEFAULT_MAX_UNAVAILABLE,
    GPU_GROUP_ZONES,
    QUOTA_NAMES,
    NodeLine,
    node_lines,
    quota_code_for,
    surge_nodes,
    update_surge_vcpus,
    vcpus_needed,
)
from components.plan.topology import plan_deployment
from components.preflight.aws import Unreachable, call, short
from components.preflight.context import TITLES, Context

# EKS tags every managed node group instance with its cluster's name.
CLUSTER_TAG = "eks:cluster-name"


def increase_command(code: str, desired: int, region: str) -> str:
    """The copy-paste Service Quotas request, every value shell-quoted."""
    return " ".join([
        "aws service-quotas request-service-quota-increase --service-code ec2",
        "--quota-code", shlex.quote(code), "--desired-value", shlex.quote(str(desired)),
        "--region", shlex.quote(region),
    ])



@dataclass
class QuotaFacts:
    lines: list[NodeLine]  # GPU groups at their autoscaling maximum (node_lines)
    need: dict[str, int]  # vCPUs per quota code of `lines`
    need_at_start: dict[str, int]  # the same at the starting counts (equal without autoscaling)
    quotas: dict[str, float]  # only the codes that could be read
    unreadable: dict[str, str]  # code -> why
    used_others: dict[str, int]
    used_this_stack: dict[str, int]
    usage_error: Optional[str]


def _usage(ctx: Context, codes: Iterable[str]) -> tuple[dict[str, int], dict[str, int], Optional[str]]:
    """vCPUs of running instances per quota code: (other instances, this stack's cluster on update)."""
    cluster = ctx.deployed.effective_cluster_name if ctx.deployed is not None else None
    try:
        running = call(ctx.aws.running_instances)
        unknown_types = sorted({t for t, _ in running if t not in ctx.types})
        if unknown_types:
            found, _ = call(lambda: ctx.aws.instance_types(unknown_types))
            ctx.types.update(found)
    except (ClientError, Unreachable) as exc:
        return {}, {}, short(exc) if isinstance(exc, ClientError) else str(exc)
    others: dict[str, int] = {code: 0 for code in codes}
    mine: dict[str, int] = {code: 0 for code in codes}
    for instance_type, tags in running:
        code = quota_code_for(instance_type)
        if code is None:
            continue
        info = ctx.types.get(instance_type)
        known = catalogue.lookup(instance_type)
        vcpus = (info or {}).get("VCpuInfo", {}).get("DefaultVCpus") or (known.vcpus if known else 0)
        bucket = mine if cluster is not None and tags.get(CLUSTER_TAG) == cluster else others
        bucket[code] = bucket.get(code, 0) + int(vcpus)
    return others, mine, None


def quota_facts(ctx: Context) -> QuotaFacts:
    vcpus = {n: int(i.get("VCpuInfo", {}).get("DefaultVCpus", 0)) for n, i in ctx.types.items()}
    lines = node_lines(ctx.plan, vcpus)
    need = vcpus_needed(lines)
    need_at_start = vcpus_needed(node_lines(ctx.plan, vcpus, at_maximum=False))
    quotas: dict[str, float] = {}
    unreadable: dict[str, str] = {}
    for code in sorted(need):
        try:
            quotas[code] = call(partial(ctx.aws.quota, code))
        except (ClientError, Unreachable) as exc:
            unreadable[code] = short(exc) if isinstance(exc, ClientError) else str(exc)
    others, mine, usage_error = _usage(ctx, need)
    return QuotaFacts(lines, need, need_at_start, quotas, unreadable, others, mine, usage_error)


def _need_text(facts: QuotaFacts, code: str) -> str:
    parts = [f"{line.nodes} x {line.instance_type} ({line.vcpus})"
             for line in facts.lines if line.quota_code == code]
    start = facts.need_at_start.get(code, 0)
    scaled = (f" at every autoscaled phase's maxReplicas, {start} at the starting counts"
              if start != facts.need[code] else "")
    return f"{facts.need[code]} vCPUs ({' + '.join(parts)}){scaled}"


def check_vcpu_quota(ctx: Context, facts: QuotaFacts) -> None:
    spec, cid, title = ctx.spec, "vcpu-quota", TITLES["vcpu-quota"]
    codes = sorted(facts.need)
    if facts.unreadable:
        needs = "; ".join(f"{c} ({QUOTA_NAMES.get(c, 'quota')}): needs {_need_text(facts, c)}" for c in codes)
        why = "; ".join(f"{c}: {w}" for c, w in sorted(facts.unreadable.items()))
        ctx.add(Check.warned(
            cid, title, f"Service Quotas could not be read ({why}); this stack {needs}",
            "check the quotas in the Service Quotas console (grant servicequotas:GetServiceQuota to "
            "let preflight read them)",
        ))
        return
    lines, fails, short_at_max = [], [], []
    for code in codes:
        quota = facts.quotas[code]
        used = facts.used_others.get(code, 0)
        free = quota - used
        counted = f"{used} in use by other running instances"
        if ctx.deployed is not None:
            counted += (f", {facts.used_this_stack.get(code, 0)} by this stack's cluster "
                        f"{ctx.deployed.effective_cluster_name} (not counted: the update reuses them)")
        text = (f"{code} ({QUOTA_NAMES.get(code, 'quota')}): needs {_need_text(facts, code)}; quota "
                f"{quota:g}, {counted}, {free:g} free")
        lines.append(text)
        # Enough for the maximum: an increase that only covers the start stalls the scale-ups.
        command = increase_command(code, int(math.ceil(used + facts.need[code])), spec.region)
        if facts.need_at_start.get(code, 0) > free:
            fails.append(command)
        elif facts.need[code] > free:
            short_at_max.append(command)
    detail = "; ".join(lines)
    if facts.usage_error:
        detail += f"; running instances could not be listed ({facts.usage_error}), usage counted as 0"
    if fails:
        ctx.add(Check.failed(cid, title, "not enough quota: " + detail,
                             "request an increase in Service Quotas: " + " && ".join(fails + short_at_max)))
    elif short_at_max:
        ctx.add(Check.warned(
            cid, title, "the starting nodes fit, but not every autoscaled phase at its maxReplicas: "
            "a scale-up past the quota leaves its engine's worker pod Pending, without a node: " + detail,
            "request an increase before the load needs it: " + " && ".join(short_at_max)
            + ", or lower autoscaling.maxReplicas"))
    elif facts.usage_error:
        ctx.add(Check.warned(cid, title, detail, "grant ec2:DescribeInstances to count running instances"))
    else:
        ctx.add(Check.passed(cid, title, detail))


def check_update_headroom(ctx: Context, facts: Optional[QuotaFacts]) -> None:
    """The peak of THIS update (components.changes: the old group beside its replacement until the
    end, the old Ray cluster's nodes until a zero-downtime switch, surge nodes of a rolling
    update) against the free quota; with no such peak, the headroom a later rolling update needs."""
    spec, cid, title = ctx.spec, "update-headroom", TITLES["update-headroom"]
    if ctx.deployed is None:
        ctx.add(Check.skipped(cid, title, "new stack: nothing runs beside its nodes"))
        return
    if facts is None or facts.unreadable:
        ctx.add(Check.skipped(cid, title, "Service Quotas could not be read (see vcpu-quota)"))
        return
    strategy = assess(plan_deployment(ctx.deployed), ctx.plan, ctx.deployed_zone).chosen
    if strategy.extra_nodes:
        extra = strategy.extra_vcpus
        why = ", ".join(f"{line.nodes} x {line.instance_type} ({line.why})" for line in strategy.extra_nodes)
        rule = f"this update ({STRATEGY_WORDS[strategy.name]}) runs {why} beside the new settings' nodes"
    else:
        extra = update_surge_vcpus(facts.lines)
        rule = (f"this update adds no nodes; a later rolling update (AMI or Kubernetes version) lets "
                f"each GPU node group launch up to {surge_nodes()} extra nodes before draining old "
                f"ones (EKS: larger of 2 x its {GPU_GROUP_ZONES} zone and maxUnavailable "
                f"{DEFAULT_MAX_UNAVAILABLE})")
    lines, short = [], []
    for code in sorted(extra):
        free = facts.quotas.get(code, 0.0) - facts.used_others.get(code, 0)
        need = facts.need.get(code, 0)
        peak = need + extra[code]
        lines.append(f"{code}: {need} + {extra[code]} = {peak} vCPUs at peak, {free:g} free")
        if peak > free:
            desired = int(math.ceil(facts.used_others.get(code, 0) + peak))
            short.append(increase_command(code, desired, spec.region))
    detail = f"{rule}; " + "; ".join(lines)
    if short and strategy.extra_nodes:
        ctx.add(Check.failed(
            cid, title, "not enough quota for this update's peak: its new nodes would wait for "
            "capacity and `up` would stall: " + detail,
            "request an increase first: " + " && ".join(short)
            + ("" if strategy.name == "inPlace" else
               ", or roll out in place (raypd:upgradeStrategy inPlace) at the price of downtime"),
        ))
    elif short:
        ctx.add(Check.warned(
            cid, title,
            "a later update that replaces GPU nodes (AMI or Kubernetes version, launch template) "
            "would stall waiting for capacity: " + detail,
            "request headroom before such an update: " + " && ".join(short),
        ))
    else:
        ctx.add(Check.passed(cid, title, detail))

