"""Specs shared by the renderer tests: the reference, a heterogeneous PD stack, a colocated one."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from components.spec import DeploymentSpec

# Prefill on H100 nodes, decode on L40S nodes: two node groups, each phase pinned to its own.
HETEROGENEOUS: dict[str, Any] = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}
COLOCATED: dict[str, Any] = {"raypd:mode": "colocated"}


@pytest.fixture
def make_spec() -> Callable[[dict[str, Any]], DeploymentSpec]:
    def build(config: dict[str, Any], stack: str = "dev") -> DeploymentSpec:
        return DeploymentSpec.from_config(config, stack)
    return build


@pytest.fixture
def reference_spec() -> DeploymentSpec:
    """The AWS reference deployment: every default."""
    return DeploymentSpec.from_config({}, "dev")


@pytest.fixture
def heterogeneous_spec() -> DeploymentSpec:
    return DeploymentSpec.from_config(HETEROGENEOUS, "dev")


@pytest.fixture
def colocated_spec() -> DeploymentSpec:
    return DeploymentSpec.from_config(COLOCATED, "dev")
