"""The small raypd stack the Ray Serve LLM test deploys, rendered by raypd's own renderer.

A disaggregated stack of the tiny model on the reference instance types (one prefill and one
decode replica), with NIXL's UCX backend: the only backend NIXL can load on a CPU machine (its
LIBFABRIC plugin needs libcuda; tests/fixtures/real/libfabric/ shows the engine dying). raypd
warns about UCX on EFA nodes, which is right there and irrelevant here.
"""

from __future__ import annotations

from typing import Any

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config
from tests.real.locate import ENGINE_DTYPE, MODEL_ID

SMALL_STACK: dict[str, Any] = {
    "aws:region": "us-east-2",
    "raypd:mode": "disaggregated",
    "raypd:model": {"id": MODEL_ID, "source": "raypd-tests/tiny-llama", "maxModelLen": 1024,
                    "dtype": ENGINE_DTYPE, "gpuMemoryUtilization": 0.9, "enforceEager": True},
    "raypd:prefill": {"instanceType": "g6.8xlarge", "replicas": 1},
    "raypd:decode": {"instanceType": "g6.8xlarge", "replicas": 1},
    "raypd:kvTransfer": {"connector": "NixlConnector", "backend": "UCX"},
}


def small_stack_spec() -> DeploymentSpec:
    return DeploymentSpec.from_config(SMALL_STACK, "real-tests")


def small_stack_serve_config() -> dict[str, Any]:
    """raypd's Serve config of the small stack, as `python -m serve.render` would print it."""
    return render_serve_config(plan_deployment(small_stack_spec()))
