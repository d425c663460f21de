"""The program builds the deployment plan once and hands it to every component (issue 8)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.spec import DeploymentSpec
from components.plan import topology
from components.stack.mockrun import run_program
from components.stack.program import build
from tests.pulumi.conftest import HETEROGENEOUS


@pytest.mark.parametrize("config", [{}, HETEROGENEOUS])
def test_one_program_run_plans_the_node_groups_once(monkeypatch, config):
    calls: list[Any] = []
    real = topology.plan_gpu_groups

    def counting(spec: DeploymentSpec) -> list[topology.GpuGroupPlan]:
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(topology, "plan_gpu_groups", counting)
    spec = DeploymentSpec.from_config(config, "dev")
    run = run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region)
    assert len(calls) == 1
    gpu_groups = [r for r in run.resources if r.type == "eks:index:ManagedNodeGroup"
                  and r.inputs.get("labels", {}).get("role") == "gpu-worker"]
    assert len(gpu_groups) == len(real(spec))


def test_no_module_but_the_plan_module_holds_the_node_group_planner():
    # A module holding its own reference would bypass the one plan (and the count above).
    import sys

    import components.preflight.run  # noqa: F401
    import components.render.outputs  # noqa: F401
    import components.render.rayservice  # noqa: F401
    import components.render.serve_config  # noqa: F401
    import serve.render  # noqa: F401
    import webui.diagram  # noqa: F401
    import webui.summary  # noqa: F401

    holders = sorted(
        name for name, module in list(sys.modules.items())
        if name.split(".")[0] in ("components", "serve", "webui") and name != "components.plan.topology"
        and getattr(module, "plan_gpu_groups", None) is not None
    )
    assert holders == []
