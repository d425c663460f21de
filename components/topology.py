"""The node-group plan: which GPU node groups a spec needs, how big, and what they advertise.

Pure functions of the spec. The Pulumi node-group component, the RayService renderer (one Ray worker
group per GPU node group), the stack outputs, the web preview and the cost estimate all read this plan,
so "how many nodes of what" is decided in one place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from components import catalogue, defaults
from components.spec import DeploymentSpec

SHARED_GROUP = "gpu"


@dataclass(frozen=True)
class GpuGroupPlan:
    name: str  # node group name and Ray worker group name
    instance_type: str
    nodes: int
    gpus_per_node: int
    efa_interfaces_per_node: int
    phases: tuple[str, ...]
    labels: dict[str, str] = field(hash=False)
    # A custom Ray resource only this group's workers advertise, so a phase can be pinned to it.
    ray_resource: Optional[str]
    root_volume_gb: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def usd_per_hour(self) -> Optional[float]:
        price = catalogue.CATALOGUE[self.instance_type].usd_per_hour
        return None if price is None else round(price * self.nodes, 4)


def _group(name: str, instance_type: str, nodes: int, phases: tuple[str, ...], pinned: bool) -> GpuGroupPlan:
    hardware = catalogue.CATALOGUE[instance_type]
    labels = dict(defaults.GPU_ROLE_LABEL)
    if pinned:
        labels[defaults.PHASE_LABEL_KEY] = name
    return GpuGroupPlan(
        name=name,
        instance_type=instance_type,
        nodes=nodes,
        gpus_per_node=hardware.gpus,
        efa_interfaces_per_node=hardware.max_efa_interfaces,
        phases=phases,
        labels=labels,
        ray_resource=f"raypd_{name}" if pinned else None,
        root_volume_gb=max(
            defaults.MIN_ROOT_VOLUME_GB, defaults.ROOT_VOLUME_GB_PER_GPU * hardware.gpus
        ),
    )


def plan_gpu_groups(spec: DeploymentSpec) -> list[GpuGroupPlan]:
    """One group per phase, except that phases on the same instance type share one group.

    Sharing reproduces the reference (one group of two g6.8xlarge, label role=gpu-worker). Phases
    on different instance types each get their own group and a Ray resource that pins them to it.
    """
    phases = spec.phases
    types = {phase.instance_type for phase in phases.values()}
    if len(phases) > 1 and len(types) == 1:
        nodes = sum(phase.nodes for phase in phases.values())
        return [_group(SHARED_GROUP, types.pop(), nodes, tuple(phases), pinned=False)]
    if len(phases) == 1:
        (name, phase), = phases.items()
        return [_group(name, phase.instance_type, phase.nodes, (name,), pinned=False)]
    return [
        _group(name, phase.instance_type, phase.nodes, (name,), pinned=True)
        for name, phase in phases.items()
    ]


def group_for_phase(groups: list[GpuGroupPlan], phase: str) -> GpuGroupPlan:
    for group in groups:
        if phase in group.phases:
            return group
    raise KeyError(phase)


@dataclass(frozen=True)
class CostEstimate:
    usd_per_hour: float  # what is known; lines with no price are listed in `unpriced`
    unpriced: tuple[str, ...]


def estimate_cost(spec: DeploymentSpec) -> CostEstimate:
    """On-demand USD/hour: GPU and system nodes, the EKS control plane and the NAT gateway."""
    total = catalogue.EKS_CONTROL_PLANE_USD_PER_HOUR + catalogue.NAT_GATEWAY_USD_PER_HOUR
    unpriced: list[str] = []
    system = catalogue.lookup(spec.system_nodes.instance_type)
    if system is not None and system.usd_per_hour is not None:
        total += system.usd_per_hour * spec.system_nodes.count
    else:
        unpriced.append(spec.system_nodes.instance_type)
    for group in plan_gpu_groups(spec):
        if group.usd_per_hour is None:
            unpriced.append(group.instance_type)
        else:
            total += group.usd_per_hour
    return CostEstimate(round(total, 4), tuple(unpriced))
