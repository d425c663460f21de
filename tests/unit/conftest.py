"""Specs shared by the renderer tests: the reference, a heterogeneous PD stack, a colocated one."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from components.config.spec import DeploymentSpec

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


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's server on 127.0.0.1 (one per session): STS, EC2, EKS and S3 from AWS's recorded data."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()
