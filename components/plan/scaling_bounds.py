"""How far each GPU node group may scale, and what size to send it.

A phase serves between a minimum and a maximum number of replicas (issue 30 §1: PhaseSpec
min_replicas/max_replicas, from its `autoscaling` block); its node group must hold that many engines
at either end, so its managed node group's min/max sizes are GpuGroupPlan.min_nodes/max_nodes (the
phases sharing the group summed). The node autoscaler (components.render.node_autoscaler) moves the
group's size between them; the starting count (`replicas`, hence GpuGroupPlan.nodes) is where a new
group starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from components.plan.topology import GpuGroupPlan


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


def group_node_bounds(group: GpuGroupPlan) -> NodeBounds:
    """The managed node group's min/max: every phase on the group at its minimum, at its maximum
    (GpuGroupPlan.min_nodes/max_nodes, from each phase's `autoscaling` block)."""
    return NodeBounds(minimum=group.min_nodes, maximum=group.max_nodes, start=group.nodes)
