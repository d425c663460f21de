"""The words of the change preview: what kind of change an effect is, the effect itself, the two
strategies to carry a change out, and the assessment that gathers them.

Every module that judges one part of a change (components.changes.cluster, node_groups, rayservice,
addons, endpoint, observability) returns `Effect`s; components.changes.assess orders them and prices
the strategies. Kept apart from `assess` so the part modules can use the types without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Optional

from components.plan.capacity import NodeLine, vcpus_needed


class Kind(IntEnum):
    """What a change does, least disruptive first (the docs table's words)."""

    NO_SERVING_EFFECT = 0
    IN_PLACE = 1
    ROLL_NODES = 2
    RESTART_ENGINES = 3
    REPLACE_NODES = 4
    NEW_RAY_CLUSTER = 5
    # The endpoint's load balancer is replaced or removed: clients outside the cluster must move.
    NEW_LOAD_BALANCER = 6
    NEW_ENDPOINT = 7
    REPLACE_CLUSTER = 8
    REFUSED = 9

    @property
    def words(self) -> str:
        return _KIND_WORDS[self]


_KIND_WORDS = {
    Kind.NO_SERVING_EFFECT: "no effect on serving",
    Kind.IN_PLACE: "in place",
    Kind.ROLL_NODES: "nodes roll (surge, then drain)",
    Kind.RESTART_ENGINES: "engines restart",
    Kind.REPLACE_NODES: "nodes replaced",
    Kind.NEW_RAY_CLUSTER: "new Ray cluster",
    Kind.NEW_LOAD_BALANCER: "new load balancer (new address)",
    Kind.NEW_ENDPOINT: "new RayService (new endpoint)",
    Kind.REPLACE_CLUSTER: "new EKS cluster",
    Kind.REFUSED: "refused",
}
STRATEGY_WORDS = {"inPlace": "in place", "newCluster": "zero downtime (new cluster)"}


@dataclass(frozen=True)
class Effect:
    """One consequence: what changes, how (kind), in words, and the endpoint downtime it costs."""

    subject: str
    kind: Kind
    detail: str
    downtime_seconds: float = 0.0
    # The downtime happens only when the update runs on the nodes already there (inPlace): EKS
    # drains a shrinking group's nodes, engines on them included. A zero-downtime switch starts
    # the new Ray cluster on node groups of its own and deletes the old ones after it.
    on_running_nodes_only: bool = False


@dataclass(frozen=True)
class Strategy:
    """One way to carry out the change: its downtime, its extra nodes and what they cost."""

    name: str  # inPlace | newCluster
    downtime_seconds: float
    # The nodes that run at the peak BEYOND the new settings' own nodes (the old group until it is
    # deleted, the old cluster's nodes until the switch, surge nodes): what the peak adds to the
    # new plan's quota need, and what the change costs beyond the new plan's price.
    extra_nodes: tuple[NodeLine, ...]
    # How long the extra nodes run (the switch, or the node-group replacement), and their cost.
    extra_seconds: float
    summary: str

    @property
    def extra_usd(self) -> Optional[float]:
        prices = [line.usd_per_hour for line in self.extra_nodes]
        if not self.extra_nodes:
            return 0.0
        if any(price is None for price in prices):
            return None
        return round(sum(p for p in prices if p is not None) * self.extra_seconds / 3600, 2)

    @property
    def extra_vcpus(self) -> dict[str, int]:
        """Extra vCPUs per Service Quotas code at the peak (what the preflight checks)."""
        return vcpus_needed(self.extra_nodes)


@dataclass(frozen=True)
class Assessment:
    effects: tuple[Effect, ...]
    # The strategy the stack is set to (the one `up` uses) and, when the change restarts engines
    # or rebuilds the Ray cluster, both strategies to choose from.
    chosen: Strategy
    choices: tuple[Strategy, ...] = field(default=())

    @property
    def kind(self) -> Kind:
        return max((effect.kind for effect in self.effects), default=Kind.NO_SERVING_EFFECT)

    @property
    def disruptive(self) -> bool:
        """The change restarts engines or rebuilds the Ray cluster: the strategy matters."""
        return bool(self.choices)

    def as_dict(self) -> dict[str, Any]:
        """JSON form for the web preview and the API."""
        def strategy(item: Strategy) -> dict[str, Any]:
            return {
                "name": item.name, "words": STRATEGY_WORDS[item.name],
                "downtimeSeconds": round(item.downtime_seconds),
                "extraNodes": [{"instanceType": line.instance_type, "nodes": line.nodes,
                                "why": line.why} for line in item.extra_nodes],
                "extraSeconds": round(item.extra_seconds),
                "extraUsd": item.extra_usd,
                "extraVcpus": item.extra_vcpus,
                "summary": item.summary,
            }
        return {
            "kind": self.kind.words,
            "effects": [{"subject": e.subject, "kind": e.kind.words, "detail": e.detail,
                         "downtimeSeconds": round(e.downtime_seconds)} for e in self.effects],
            "chosen": strategy(self.chosen),
            "choices": [strategy(item) for item in self.choices],
        }


def minutes(seconds: float) -> str:
    return f"about {max(1, round(seconds / 60))} min"
