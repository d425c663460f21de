"""The program under Pulumi's mock runtime: offline plans of the stacks the tests look at.

Each plan is one real run of `components.stack.program.build` (through `components.stack.offline_plan.run_plan`),
computed once per module; tests read the registered resources and outputs like a user reads the
offline plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from components.config.stack_file import load_stack_file
from components.stack.offline_plan import run_plan

ROOT = Path(__file__).resolve().parents[2]

# Prefill on H100 nodes (TP=8), decode on L40S nodes (TP=8, two replicas): two GPU node groups.
HETEROGENEOUS: dict[str, Any] = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}
COLOCATED: dict[str, Any] = {"raypd:mode": "colocated"}


class Plan:
    """A plan document with the look-ups tests need."""

    def __init__(self, document: dict[str, Any]):
        self.document = document
        self.resources: list[dict[str, Any]] = document["resources"]
        self.outputs: dict[str, Any] = document["outputs"]

    def of_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def named(self, name: str) -> dict[str, Any]:
        found = [r for r in self.resources if r["name"] == name]
        assert len(found) == 1, f"expected one resource named {name}, found {len(found)}"
        return found[0]

    def children_of(self, parent: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["parent"] == parent]

    def gpu_node_groups(self) -> dict[str, dict[str, Any]]:
        """GPU ManagedNodeGroups by raypd group name (the parent GpuNodeGroup's plan name)."""
        groups = {}
        for component in self.of_type("raypd:cluster:GpuNodeGroup"):
            # Its other children are the node autoscaler's ASG tags.
            (child,) = [c for c in self.children_of(component["name"])
                        if c["type"] == "eks:index:ManagedNodeGroup"]
            groups[component["name"].removesuffix("-nodes")] = child
        return groups


@pytest.fixture(scope="session")
def make_plan() -> Callable[..., Plan]:
    """One mock-runtime run per distinct (config, stack, secret keys) in the session: a run takes
    seconds, and tests only read the plan (the session-wide plans below are shared the same way)."""
    plans: dict[str, Plan] = {}

    def build(config: dict[str, Any], stack: str = "dev", secret_keys: tuple[str, ...] = ()) -> Plan:
        key = json.dumps([config, stack, sorted(secret_keys)], sort_keys=True)
        if key not in plans:
            plans[key] = Plan(run_plan(config, secret_keys, stack))
        return plans[key]
    return build


@pytest.fixture(scope="session")
def reference_config() -> dict[str, Any]:
    config, _ = load_stack_file(ROOT / "Pulumi.dev.yaml")
    return config


@pytest.fixture(scope="session")
def reference_plan(make_plan, reference_config) -> Plan:
    return make_plan(reference_config)


@pytest.fixture(scope="session")
def heterogeneous_plan(make_plan) -> Plan:
    return make_plan(HETEROGENEOUS)


@pytest.fixture(scope="session")
def colocated_plan(make_plan) -> Plan:
    return make_plan(COLOCATED)
