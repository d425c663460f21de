"""How far each phase, and each GPU node group under it, may scale: the one place that reads a
phase's replica bounds.

A phase serves between a minimum and a maximum number of replicas (issue 30 §1); its node group
must hold that many engines at either end, so its managed node group's min/max sizes are the
phase's bounds times the nodes one replica needs (`nodes_for`), summed over the phases that share
the group. The node autoscaler (components.render.node_autoscaler) moves the group's size between
them; the starting count (`replicas`, hence GpuGroupPlan.nodes) is where a new group starts.

`phase_replica_bounds` is the only reader of the bounds, so the spec's autoscaling block reaches
the node groups, the change preview and the cost at the bounds through one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from components.config.spec import DeploymentSpec, PhaseSpec
from components.plan.topology import DeploymentPlan, GpuGroupPlan


def phase_replica_bounds(spec: DeploymentSpec, phase: str) -> tuple[int, int]:
    """(minimum, maximum) replicas of `phase` (a key of spec.phases).

    TODO(h-scale-config): read `raypd:<phase>.autoscaling.minReplicas` / `.maxReplicas` (the
    `autoscaling` block h-scale-config adds to PhaseSpec) and keep (replicas, replicas) when the
    block is absent. Until then every phase is fixed at its `replicas`, as before issue 30.
    """
    settings = spec.phases[phase]
    return settings.replicas, settings.replicas


def nodes_for(settings: PhaseSpec, replicas: int) -> int:
    """Whole nodes for `replicas` engines of a phase (the rule of PhaseSpec.nodes)."""
    return -(-replicas // settings.replicas_per_node)


@dataclass(frozen=True)
class NodeBounds:
    """A GPU node group's size limits and where it starts."""

    minimum: int
    maximum: int
    start: int

    @property
    def autoscaled(self) -> bool:
        """The node autoscaler may move this group (its limits differ)."""
        return self.maximum > self.minimum

    def desired(self, running: Optional[int]) -> int:
        """The desired size to send: the start for a new group, else what runs, within the limits.

        Why not always the start: the node autoscaler moves a running group's desired size, and
        EKS applies a node group update's scaling config whole (terraform-provider-aws
        `expandNodegroupScalingConfig` sends desiredSize with any min/max change), so sending the
        start again would shrink a grown group, draining nodes EKS picks, busy engines included.
        """
        nodes = self.start if running is None else running
        return max(self.minimum, min(self.maximum, nodes))


def group_node_bounds(plan: DeploymentPlan, group: GpuGroupPlan) -> NodeBounds:
    """The managed node group's min/max: every phase on the group at its minimum, at its maximum."""
    spec = plan.spec
    minimum = maximum = 0
    for phase in group.phases:
        low, high = phase_replica_bounds(spec, phase)
        minimum += nodes_for(spec.phases[phase], low)
        maximum += nodes_for(spec.phases[phase], high)
    return NodeBounds(minimum=minimum, maximum=maximum, start=group.nodes)
