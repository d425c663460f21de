"""What an autoscaled phase can expect (issue 30): how long a new replica takes, and the warnings.

A phase with an `autoscaling` block (components.config.autoscaling_spec) grows by engines Ray Serve
adds; each new engine past what the running GPU nodes hold needs a new node, which joins its node
group's cluster placement group, pulls the serving image and loads the model. Two choices can make
that go badly, and the plan warns about both (`plan_warnings`, what the plan, the web app, the
program and `serve.render` show):

- a downscale delay shorter than that cold start: Serve stops a replica after a lull that the next
  burst needs back, and pays the whole cold start again (the phase flaps);
- a maximum whose nodes outgrow a cluster placement group's practical size: EC2 places nodes added
  later into the group on the same network spine as the first ones, and the further the group
  grows past its first launch, the likelier a scale-up stops at InsufficientInstanceCapacity.

The vCPU quota at the maximum is the preflight's (components.preflight.quota): it needs the account.
docs/scaling.md says all of it for people.
"""

from __future__ import annotations

import math

from components.plan.topology import DeploymentPlan
from components.plan.typical_durations import CHANGE_TIMES, TYPICAL

# Nodes raypd treats as the practical size of one cluster placement group (an estimate, not an AWS
# limit). EC2's placement-group guide documents no instance count for a cluster placement group;
# it recommends launching every instance the group needs in one request, and warns that instances
# added later are more likely to fail with InsufficientInstanceCapacity. An autoscaled group adds
# every node later, one scale-up at a time; 16 nodes is what raypd expects a GPU family to offer
# on one spine of one zone without a capacity reservation.
PLACEMENT_GROUP_PRACTICAL_NODES = 16
_RAY_SERVICE = "kubernetes:ray.io/v1:RayService"


def replica_cold_start_seconds() -> float:
    """Seconds from Serve asking for one more engine to it serving, on a node that must join first:
    the node (CHANGE_TIMES gpu-node-join) and then what a RayService's worker does before Ready
    (TYPICAL: image pull, weights, engine init, Serve)."""
    return CHANGE_TIMES["gpu-node-join"].seconds + TYPICAL[_RAY_SERVICE].seconds


def _minutes(seconds: float) -> str:
    return f"~{max(1, round(seconds / 60))} min"


def _flapping(plan: DeploymentPlan) -> list[str]:
    cold = replica_cold_start_seconds()
    notes = []
    for name, phase in plan.phases.items():
        scaling = phase.settings.autoscaling
        if scaling is None or scaling.downscale_delay >= cold:
            continue
        given = "" if scaling.downscale_delay_seconds is not None else " (Serve's default)"
        notes.append(
            f"raypd:{name}.autoscaling.downscaleDelaySeconds {scaling.downscale_delay:g} s{given} is "
            f"shorter than a new {name} replica's cold start ({_minutes(cold)}: a GPU node joins, pulls "
            "the image and loads the model; raypd's estimate, docs/scaling.md): after a lull Serve "
            "stops a replica the next burst needs back, which then waits the whole cold start, so "
            f"the phase flaps; set it to at least {math.ceil(cold)}")
    return notes


def _crowded_placement_groups(plan: DeploymentPlan) -> list[str]:
    notes = []
    for group in plan.groups:
        grows = any(plan.phases[name].settings.autoscaling is not None for name in group.phases)
        # Only EFA node groups get a cluster placement group (components.stack.node_groups).
        if (not grows or group.efa_interfaces_per_node == 0
                or group.max_nodes <= PLACEMENT_GROUP_PRACTICAL_NODES):
            continue
        keys = " and ".join(f"raypd:{name}.autoscaling.maxReplicas" for name in group.phases
                            if plan.phases[name].settings.autoscaling is not None)
        notes.append(
            f"{keys}: at the maximum, GPU node group {group.name} holds {group.max_nodes} "
            f"{group.instance_type} nodes in one cluster placement group, more than the "
            f"{PLACEMENT_GROUP_PRACTICAL_NODES} raypd takes as its practical size: nodes added to a "
            "cluster placement group after its first launch are the likeliest to fail with "
            "InsufficientInstanceCapacity, so scale-ups may stop short; lower maxReplicas, or reserve "
            "the capacity (an On-Demand Capacity Reservation in the placement group)")
    return notes


def scaling_warnings(plan: DeploymentPlan) -> list[str]:
    """The allowed but risky autoscaling choices of a plan (none for fixed counts)."""
    return _flapping(plan) + _crowded_placement_groups(plan)


def plan_warnings(plan: DeploymentPlan) -> list[str]:
    """Every warning of a deployment: the spec's own (DeploymentSpec.warnings) and the plan's."""
    return [*plan.spec.warnings, *scaling_warnings(plan)]
