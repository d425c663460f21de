"""The nodes a stack runs, counted the way EC2 counts them: vCPUs against On-Demand quotas.

One model for two readers: the preflight's quota checks (components.preflight: does the account's
quota cover the nodes, and the extra nodes of an update) and the change preview's strategies
(components.changes: which nodes run beside the new ones at an update's peak, what they cost). A
`NodeLine` is `nodes` x `instance_type` and why they run, with the vCPUs each and the Service
Quotas code they count against; `vcpus_needed` sums lines per code. The quota codes and the surge
of a rolling managed node-group update are worked out here only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from components.config import catalogue
from components.plan.topology import DeploymentPlan, GpuGroupPlan

QUOTA_NAMES: dict[str, str] = {
    catalogue.QUOTA_G_AND_VT: "Running On-Demand G and VT instances",
    catalogue.QUOTA_P: "Running On-Demand P instances",
    catalogue.QUOTA_STANDARD: "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
}

# Extra nodes a managed node group may start during a rolling update (EKS user guide, "Managed node
# update behavior", scale-up phase): the Auto Scaling group's maximum and desired size grow by the
# larger of "up to twice the number of Availability Zones the Auto Scaling group is deployed in"
# and the update's maxUnavailable (default 1; raypd sets no updateConfig). New nodes start before
# old ones are drained.
GPU_GROUP_ZONES = 1  # every GPU node group sits in one subnet of the GPU AZ (EFA cannot cross AZs)
DEFAULT_MAX_UNAVAILABLE = 1


def surge_nodes(zones: int = GPU_GROUP_ZONES, max_unavailable: int = DEFAULT_MAX_UNAVAILABLE) -> int:
    """Extra nodes a managed node group may launch during a rolling update (documented upper bound)."""
    return max(2 * zones, max_unavailable)


def quota_code_for(instance_type: str) -> Optional[str]:
    """The On-Demand vCPU quota an instance type counts against; None for the families raypd does
    not track (F, X, Inf, Trn, DL, HPC, Mac, high-memory...). Known types: the catalogue decides."""
    known = catalogue.lookup(instance_type)
    if known is not None:
        return known.quota_code
    letters = re.match(r"[a-z]+", instance_type.split(".", 1)[0])
    prefix = letters.group(0) if letters else ""
    if prefix in ("g", "gr", "vt"):
        return catalogue.QUOTA_G_AND_VT
    if prefix == "p":
        return catalogue.QUOTA_P
    if prefix in ("a", "c", "d", "h", "i", "m", "r", "t", "z"):
        return catalogue.QUOTA_STANDARD
    return None


@dataclass(frozen=True)
class NodeLine:
    """`nodes` x `instance_type` for `why`, `vcpus` each, counted against the quota `quota_code`;
    `gpu_group`: the nodes of a GPU node group (what a rolling update surges)."""

    instance_type: str
    nodes: int
    why: str
    vcpus: int
    quota_code: str
    gpu_group: bool = False

    @classmethod
    def of(cls, instance_type: str, nodes: int, why: str, *, gpu_group: bool = False,
           answered: Optional[Mapping[str, int]] = None) -> NodeLine:
        """A line with the vCPUs EC2 `answered` per instance type (DescribeInstanceTypes), else the
        catalogue's; a type no quota tracks counts as Standard."""
        if answered is not None and instance_type in answered:
            vcpus = answered[instance_type]
        else:
            known = catalogue.lookup(instance_type)
            vcpus = known.vcpus if known is not None else 0
        code = quota_code_for(instance_type) or catalogue.QUOTA_STANDARD
        return cls(instance_type, nodes, why, vcpus, code, gpu_group)

    @property
    def total_vcpus(self) -> int:
        return self.nodes * self.vcpus

    @property
    def usd_per_hour(self) -> Optional[float]:
        known = catalogue.lookup(self.instance_type)
        if known is None or known.usd_per_hour is None:
            return None
        return known.usd_per_hour * self.nodes


def group_line(group: GpuGroupPlan, why: str, nodes: Optional[int] = None,
               answered: Optional[Mapping[str, int]] = None) -> NodeLine:
    """A GPU node group's nodes (or `nodes` of them)."""
    return NodeLine.of(group.instance_type, group.nodes if nodes is None else nodes, why,
                       gpu_group=True, answered=answered)


def node_lines(plan: DeploymentPlan, vcpus: Mapping[str, int], at_maximum: bool = True) -> list[NodeLine]:
    """Every node the stack runs: GPU node groups (topology plan) and the system nodes.

    A GPU group counts at its maximum (issue 30: every autoscaled phase at maxReplicas, what the
    quota must hold for the last scale-up to get its node); `at_maximum` False: at the starting
    counts. The two are equal when no phase autoscales. `vcpus` is per instance type from EC2
    DescribeInstanceTypes; the catalogue fills gaps.
    """
    lines = []
    for group in plan.groups:
        nodes = group.max_nodes if at_maximum else group.nodes
        why = f"GPU group {group.name}" + (" at its autoscaling maximum" if nodes != group.nodes else "")
        lines.append(group_line(group, why, nodes, answered=vcpus))
    system = plan.spec.system_nodes
    lines.append(NodeLine.of(system.instance_type, system.count, "system nodes", answered=vcpus))
    return lines


def vcpus_needed(lines: Iterable[NodeLine]) -> dict[str, int]:
    """vCPUs per Service Quotas code."""
    need: dict[str, int] = {}
    for line in lines:
        need[line.quota_code] = need.get(line.quota_code, 0) + line.total_vcpus
    return need


def update_surge_vcpus(lines: Iterable[NodeLine]) -> dict[str, int]:
    """Extra vCPUs per quota code while the GPU node groups roll (all at once, worst case)."""
    extra: dict[str, int] = {}
    for line in lines:
        if line.gpu_group:
            extra[line.quota_code] = extra.get(line.quota_code, 0) + surge_nodes() * line.vcpus
    return extra
