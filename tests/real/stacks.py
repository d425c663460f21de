"""The small raypd stack the Ray Serve LLM tests deploy, rendered by raypd's own renderer.

A disaggregated stack of the tiny model on the reference instance types (one prefill and one
decode replica), with NIXL's UCX backend: the only backend NIXL can load on a CPU machine (its
LIBFABRIC plugin needs libcuda; tests/fixtures/real/libfabric/ shows the engine dying). raypd
warns about UCX on EFA nodes, which is right there and irrelevant here.

tests/real/ray deploys it AUTOSCALED (issue 30 §4): each phase has raypd's `autoscaling` block
(min 1, max 2, short delays), so the app runs under raypd's PD policy exactly as raypd renders it
and one Ray head serves every Ray Serve LLM test, the scaling ones included. The targets leave each
scaling test a wide margin on a busy machine (CI runs them beside the rest of the suite): prefill 3,
decode 8. A prefill-bound load (16 requests at a time) keeps its queue at prefill (> 3) and decode's
own work per request short: decode's signal ran 2-5 (a target of 4 let decode grow first), while
Serve's default policy would count all 16 on decode. A decode-bound load does not hold all its
requests in decode: with 16 at a time Serve counted 8.8-9.5 ongoing on decode (the rest streaming
back through the ingress and proxy, and in the load generator) and prefill's share at 1-3, so
decode's signal sat at its target of 8 (205 s to be decided, then flapping 2-1-2); the decode-bound
load therefore sends 32 at a time, which doubles decode's count and not prefill's share (prefill's
arrival rate is set by how fast decode answers, not by how many wait). With targets 1 and 4, a
loaded CI machine scaled the phase that should have stayed. raypd warns that a 20 s downscale delay is shorter than a
phase's cold start; on this machine that is what the test wants. What the spec cannot say,
`scaling_test_shape` adds, each with why.
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


SCALING_TEST_BOUNDS: dict[str, Any] = {"minReplicas": 1, "maxReplicas": 2,
                                       "upscaleDelaySeconds": 10, "downscaleDelaySeconds": 20}
TARGETS = {"prefill": 3, "decode": 8}  # targetOngoingRequests; why these, in the docstring
AUTOSCALED_SMALL_STACK: dict[str, Any] = {
    **SMALL_STACK,
    **{f"raypd:{phase}": {**SMALL_STACK[f"raypd:{phase}"],
                          "autoscaling": {**SCALING_TEST_BOUNDS, "targetOngoingRequests": target}}
       for phase, target in TARGETS.items()},
}
# Serve's metric windows, test-short (Serve's defaults: look back 30 s, a metric every 10 s); the Ray
# head pushes the handles' and replicas' metrics every 2 s too (tests/real/ray/conftest.py).
SERVE_METRIC_WINDOWS = {"look_back_period_s": 10, "metrics_interval_s": 2}


def small_stack_spec() -> DeploymentSpec:
    return DeploymentSpec.from_config(SMALL_STACK, "real-tests")


def small_stack_serve_config() -> dict[str, Any]:
    """raypd's Serve config of the small stack, as `python -m serve.render` would print it."""
    return render_serve_config(plan_deployment(small_stack_spec()))


def autoscaled_small_stack_serve_config() -> dict[str, Any]:
    """raypd's Serve config of the autoscaled small stack (the module docstring)."""
    return render_serve_config(plan_deployment(DeploymentSpec.from_config(AUTOSCALED_SMALL_STACK, "real-tests")))


def scaling_test_shape(serve_config: dict[str, Any]) -> dict[str, Any]:
    """What the scaling tests need beyond raypd's rendering, in place:
    - Serve's metric windows short (SERVE_METRIC_WINDOWS), so decisions follow a load step within
      seconds instead of half a minute;
    - prefill's engine runs one sequence at a time (`max_num_seqs: 1`): on the tiny model a prompt's
      prefill takes about one decode step, so nothing on this machine is prefill-bound by itself;
      one sequence at a time makes long prompts queue at prefill, as compute-bound prefill does on a GPU."""
    (app,) = serve_config["applications"]
    for override in app["deployments"]:
        override["autoscaling_config"].update(SERVE_METRIC_WINDOWS)
    app["args"]["prefill_config"]["engine_kwargs"]["max_num_seqs"] = 1
    return serve_config
