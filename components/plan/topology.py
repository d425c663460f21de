"""The deployment plan: the spec plus every decision derived from it, built once and passed along.

`plan_deployment(spec)` is the one place that decides which GPU node groups a spec needs, how big,
what they advertise, which phase runs where, and what the model needs from the engines. The Pulumi
program, the RayService and Serve renderers, the stack outputs, the preflight, the web preview and
the cost estimate all take the `DeploymentPlan` it returns, so none of them derives the node plan
again and none can disagree with another. Data flows one way:
config -> DeploymentSpec -> DeploymentPlan -> renderers -> Pulumi / Flask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Union

from components.config import catalogue, defaults
from components.config.model_catalogue import find_shape
from components.config.spec import DeploymentSpec, PhaseSpec

SHARED_GROUP = "gpu"
RAY_RESOURCE_PREFIX = "raypd_"


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
    # The fewest and most nodes the group's phases need (issue 30): their engines at
    # autoscaling.minReplicas and maxReplicas; both equal `nodes` (the starting count) when no phase
    # of the group autoscales. What the node group's minimum and maximum size must cover.
    min_nodes: int
    max_nodes: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def usd_per_hour(self) -> Optional[float]:
        """The starting count's price."""
        return self.usd_per_hour_at(self.nodes)

    def usd_per_hour_at(self, nodes: int) -> Optional[float]:
        price = catalogue.CATALOGUE[self.instance_type].usd_per_hour
        return None if price is None else round(price * nodes, 4)


def _group(name: str, phases: dict[str, PhaseSpec], pinned: bool) -> GpuGroupPlan:
    """One node group for `phases` (one instance type): their nodes added up, at the start, the
    minimum and the maximum."""
    instance_type = next(iter(phases.values())).instance_type
    hardware = catalogue.CATALOGUE[instance_type]
    labels = {**defaults.GPU_ROLE_LABEL, defaults.NODE_GROUP_LABEL: name}
    if pinned:
        labels[defaults.PHASE_LABEL_KEY] = name
    return GpuGroupPlan(
        name=name,
        instance_type=instance_type,
        nodes=sum(phase.nodes for phase in phases.values()),
        gpus_per_node=hardware.gpus,
        efa_interfaces_per_node=hardware.max_efa_interfaces,
        phases=tuple(phases),
        labels=labels,
        ray_resource=f"{RAY_RESOURCE_PREFIX}{name}" if pinned else None,
        root_volume_gb=max(
            defaults.MIN_ROOT_VOLUME_GB, defaults.ROOT_VOLUME_GB_PER_GPU * hardware.gpus
        ),
        min_nodes=sum(phase.min_nodes for phase in phases.values()),
        max_nodes=sum(phase.max_nodes for phase in phases.values()),
    )


def engines_fill_their_nodes(phases: Mapping[str, PhaseSpec]) -> bool:
    """True when every engine (one replica: TP x PP GPUs) needs all the GPUs of its node.

    Then Ray cannot put a second engine, of either phase, on a node that holds one: each worker
    advertises exactly its node's GPUs (`num-gpus`), an engine asks for all of them, and nothing
    else in the application asks for a GPU. One node per engine, whatever the phase.
    """
    return all(phase.gpus_per_replica == phase.hardware.gpus for phase in phases.values())


def plan_gpu_groups(spec: DeploymentSpec) -> list[GpuGroupPlan]:
    """The GPU node groups of a spec. Called by `plan_deployment` only: everything else takes the plan.

    The rule (prefill and decode are different Ray Serve deployments whose engines must never
    share a node, or one node does double duty while another idles):
    - one phase (colocated mode): one group; several replicas per node when they fit, since they
      are replicas of one deployment and Ray's per-process NIXL port choice keeps them apart;
    - two phases on one instance type whose engines each fill a whole node (the reference: 1-GPU
      g6.8xlarge, TP x PP = 1; or TP 8 on p5.48xlarge): one shared group, as in the reference:
      no two engines can share a node anyway (`engines_fill_their_nodes`);
    - otherwise (different types, or engines smaller than a node): one node group, Ray worker
      group and custom Ray resource per phase, and each engine's bundles ask for its resource.
    """
    phases = spec.phases
    types = {phase.instance_type for phase in phases.values()}
    if len(phases) == 1:
        (name, phase), = phases.items()
        return [_group(name, {name: phase}, pinned=False)]
    if len(types) == 1 and engines_fill_their_nodes(phases):
        return [_group(SHARED_GROUP, phases, pinned=False)]
    return [_group(name, {name: phase}, pinned=True) for name, phase in phases.items()]


def group_for_phase(groups: "tuple[GpuGroupPlan, ...] | list[GpuGroupPlan]", phase: str) -> GpuGroupPlan:
    for group in groups:
        if phase in group.phases:
            return group
    raise KeyError(phase)


@dataclass(frozen=True)
class CostEstimate:
    usd_per_hour: float  # what is known; lines with no price are listed in `unpriced`
    unpriced: tuple[str, ...]


def _estimate_cost(spec: DeploymentSpec, groups: tuple[GpuGroupPlan, ...],
                   nodes_of: Callable[[GpuGroupPlan], int] = lambda group: group.nodes) -> CostEstimate:
    """On-demand USD/hour: GPU and system nodes, the EKS control plane, the NAT gateway and the
    GCS's ElastiCache nodes (issue 31); `nodes_of` a group: its GPU nodes to price (the starting
    count unless told otherwise)."""
    total = catalogue.EKS_CONTROL_PLANE_USD_PER_HOUR + catalogue.NAT_GATEWAY_USD_PER_HOUR
    unpriced: list[str] = []
    system = catalogue.lookup(spec.system_nodes.instance_type)
    if system is not None and system.usd_per_hour is not None:
        total += system.usd_per_hour * spec.system_nodes.count
    else:
        unpriced.append(spec.system_nodes.instance_type)
    if spec.gcs_store == "elasticache":
        cache_type = spec.fault_tolerance.cache_node_type
        cache_price = catalogue.CACHE_NODE_USD_PER_HOUR.get(cache_type)
        if cache_price is None:
            unpriced.append(cache_type)
        else:
            total += cache_price * defaults.GCS_CACHE_NODES
    for group in groups:
        price = group.usd_per_hour_at(nodes_of(group))
        if price is None:
            unpriced.append(group.instance_type)
        else:
            total += price
    return CostEstimate(round(total, 4), tuple(dict.fromkeys(unpriced)))  # each type once


@dataclass(frozen=True)
class PhasePlan:
    """Where one phase runs: its node group, how many of its nodes, replicas per node."""
    name: str
    settings: PhaseSpec
    group: GpuGroupPlan
    nodes: int
    replicas: int
    replicas_per_node: int
    gpus_per_replica: int

    @property
    def ray_resource(self) -> Optional[str]:
        """The custom resource each GPU bundle of this phase's engines asks for (None: unpinned)."""
        return self.group.ray_resource

    # The phase's bounds (issue 30): `replicas` and `nodes` are where it starts.
    @property
    def min_replicas(self) -> int:
        return self.settings.min_replicas

    @property
    def max_replicas(self) -> int:
        return self.settings.max_replicas

    @property
    def min_nodes(self) -> int:
        return self.settings.min_nodes

    @property
    def max_nodes(self) -> int:
        return self.settings.max_nodes


@dataclass(frozen=True)
class DeploymentPlan:
    """The spec and every decision derived from it. Build with `plan_deployment`, once."""
    spec: DeploymentSpec
    groups: tuple[GpuGroupPlan, ...]
    phases: dict[str, PhasePlan] = field(hash=False)
    # The model has linear-attention (Mamba / Gated DeltaNet) layers: components.config.model_catalogue
    # is the one source of that fact. False for models not in its table.
    hybrid_model: bool
    cost: CostEstimate  # at the starting counts (`replicas`)
    # At every phase's autoscaling.minReplicas and maxReplicas (equal to `cost` without autoscaling).
    cost_at_min: CostEstimate
    cost_at_max: CostEstimate

    def group_for(self, phase: str) -> GpuGroupPlan:
        return self.phases[phase].group

    @property
    def instance_types(self) -> tuple[str, ...]:
        """The GPU instance types in use, sorted, each once."""
        return tuple(sorted({group.instance_type for group in self.groups}))

    @property
    def ray_resources(self) -> dict[str, str]:
        """Custom Ray resource per pinned node group (group name -> resource name)."""
        return {g.name: g.ray_resource for g in self.groups if g.ray_resource is not None}

    @property
    def gpus(self) -> int:
        return sum(group.gpus for group in self.groups)

    @property
    def gpu_nodes(self) -> int:
        return sum(group.nodes for group in self.groups)

    @property
    def autoscaling(self) -> bool:
        """Some phase has an `autoscaling` block (issue 30)."""
        return any(phase.settings.autoscaling is not None for phase in self.phases.values())

    @property
    def kv_transfer(self) -> bool:
        """Prefill hands the KV cache to decode (NIXL); False in colocated mode."""
        return self.spec.mode == "disaggregated"

    @property
    def hybrid_kv_transfer(self) -> bool:
        """A hybrid model whose KV cache (and linear-attention state) NIXL moves between engines."""
        return self.hybrid_model and self.kv_transfer


def plan_deployment(spec: DeploymentSpec) -> DeploymentPlan:
    """The whole plan of a validated spec (a pure function; cheap, but call it once per use)."""
    groups = tuple(plan_gpu_groups(spec))
    phases = {
        name: PhasePlan(
            name=name,
            settings=phase,
            group=group_for_phase(groups, name),
            nodes=phase.nodes,
            replicas=phase.replicas,
            replicas_per_node=phase.replicas_per_node,
            gpus_per_replica=phase.gpus_per_replica,
        )
        for name, phase in spec.phases.items()
    }
    shape = find_shape(spec.model.source, spec.model.id)
    return DeploymentPlan(
        spec=spec,
        groups=groups,
        phases=phases,
        hybrid_model=shape is not None and shape.hybrid,
        cost=_estimate_cost(spec, groups),
        cost_at_min=_estimate_cost(spec, groups, lambda group: group.min_nodes),
        cost_at_max=_estimate_cost(spec, groups, lambda group: group.max_nodes),
    )


def estimate_cost(spec_or_plan: Union[DeploymentSpec, "DeploymentPlan"]) -> CostEstimate:
    """The plan's cost estimate (kept for callers that hold a spec: the web app's change preview)."""
    return as_plan(spec_or_plan).cost


def as_plan(spec_or_plan: Union[DeploymentSpec, DeploymentPlan]) -> DeploymentPlan:
    """For entry points called from outside the program with a spec (web pages, CLIs): the plan
    they were handed, or the plan of the spec. Renderers inside take a plan only."""
    if isinstance(spec_or_plan, DeploymentPlan):
        return spec_or_plan
    return plan_deployment(spec_or_plan)
