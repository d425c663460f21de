"""raypd's PD scaling policy (issue 30 §2): each phase scales on its own load, not on the other's.

The policy is driven with contexts shaped exactly as Ray Serve builds them, read in Ray 2.58 (the
DLC's) and 2.60 (the tests' real Ray):
- `AutoscalingContext` (ray/serve/config.py:51, `__init__` at :66 in 2.58) takes these keywords, and
  `total_num_requests` / `total_queued_requests` arrive as CALLABLES that the context resolves
  lazily (cached properties): `get_autoscaling_context` passes `self.get_total_num_requests` and
  `self._get_queued_requests` (ray/serve/_private/autoscaling_state.py:392-411 in 2.58, :713-731 in
  2.60);
- an application-level policy gets `{DeploymentID: AutoscalingContext}` for the app's autoscaling
  deployments (`ApplicationAutoscalingState.get_decision_num_replicas`, autoscaling_state.py:937 in
  2.58), and must answer `({DeploymentID: replicas}, {DeploymentID: state} or None)`;
- `DeploymentID` is a frozen dataclass `(name, app_name)` (ray/serve/_private/common.py:25);
- `total_num_requests` is the deployment's ongoing requests (running on its replicas + queued at
  the handles that call it), `total_queued_requests` the part queued at handles.
Serve then applies delays, factors and min/max around the raw answer; this file tests the raw answer
(tests/real/scaling/serve_policy_probe.py runs it inside Ray 2.60's own wrapper and delays).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Optional, Union

import pytest

from components.render.scaling_policy.raypd_pd_autoscaling import (
    pd_phase_policy,
    phase_of,
    phase_signals,
)

APP = "llm"
PREFILL = "Prefill:qwen3_5-9b"
DECODE = "Decode:qwen3_5-9b"
INGRESS = "OpenAiIngress"
TARGET = 2.0  # target_ongoing_requests of each phase in these scenarios


@dataclass(frozen=True)
class DeploymentID:
    """ray.serve._private.common.DeploymentID."""

    name: str
    app_name: str = "default"


@dataclass
class AutoscalingConfig:
    """The fields of ray.serve.config.AutoscalingConfig these scenarios set (Serve's defaults)."""

    min_replicas: int = 1
    max_replicas: int = 2
    target_ongoing_requests: Optional[float] = TARGET
    upscale_delay_s: float = 30.0
    downscale_delay_s: float = 600.0
    look_back_period_s: float = 30.0
    aggregation_function: str = "mean"


class AutoscalingContext:
    """ray.serve.config.AutoscalingContext's constructor (2.58; 2.60 drops the async-queue field)."""

    def __init__(self, deployment_id: DeploymentID, deployment_name: str, app_name: Optional[str],
                 current_num_replicas: int, target_num_replicas: int, running_replicas: list[Any],
                 total_num_requests: Union[float, Callable[[], float]],
                 total_queued_requests: Optional[Union[float, Callable[[], float]]],
                 aggregated_metrics: Any, raw_metrics: Any, capacity_adjusted_min_replicas: int,
                 capacity_adjusted_max_replicas: int, policy_state: dict[str, Any],
                 last_scale_up_time: Optional[float], last_scale_down_time: Optional[float],
                 current_time: Optional[float], config: Optional[Any], total_pending_async_requests: int = 0):
        self.deployment_id = deployment_id
        self.deployment_name = deployment_name
        self.app_name = app_name
        self.current_num_replicas = current_num_replicas
        self.target_num_replicas = target_num_replicas
        self.running_replicas = running_replicas
        self._total_num_requests_value = total_num_requests
        self._total_queued_requests_value = total_queued_requests
        self.aggregated_metrics = aggregated_metrics
        self.raw_metrics = raw_metrics
        self.capacity_adjusted_min_replicas = capacity_adjusted_min_replicas
        self.capacity_adjusted_max_replicas = capacity_adjusted_max_replicas
        self.policy_state = policy_state
        self.last_scale_up_time = last_scale_up_time
        self.last_scale_down_time = last_scale_down_time
        self.current_time = current_time
        self.config = config

    @cached_property
    def total_num_requests(self) -> float:
        value = self._total_num_requests_value
        return value() if callable(value) else value

    @cached_property
    def total_queued_requests(self) -> Optional[float]:
        value = self._total_queued_requests_value
        return value() if callable(value) else value


def serve_context(name: str, *, running: float, queued: float = 0.0, replicas: int = 1,
                  config: Optional[AutoscalingConfig] = None) -> AutoscalingContext:
    """The context Serve builds for one deployment: `running` requests on its replicas and `queued`
    at the handles that call it, aggregated over the look-back window."""
    config = config or AutoscalingConfig()
    deployment_id = DeploymentID(name, APP)
    return AutoscalingContext(
        deployment_id=deployment_id, deployment_name=name, app_name=APP, current_num_replicas=replicas,
        target_num_replicas=replicas, running_replicas=[f"{name}#{i}" for i in range(replicas)],
        total_num_requests=lambda: running + queued, total_queued_requests=lambda: queued,
        aggregated_metrics=dict, raw_metrics=dict, capacity_adjusted_min_replicas=config.min_replicas,
        capacity_adjusted_max_replicas=config.max_replicas, policy_state={}, last_scale_up_time=None,
        last_scale_down_time=None, current_time=1_000.0, config=config)


def app_contexts(*contexts: AutoscalingContext) -> dict[DeploymentID, AutoscalingContext]:
    return {ctx.deployment_id: ctx for ctx in contexts}


def decide(contexts: dict[DeploymentID, AutoscalingContext]) -> dict[str, float]:
    decisions, state = pd_phase_policy(contexts)
    assert set(decisions) == set(contexts), "one decision per deployment, keyed by its DeploymentID"
    assert state == {}, "no policy state: Serve keeps its own delay bookkeeping"
    return {key.name: value for key, value in decisions.items()}


def default_policy(ctx: AutoscalingContext) -> float:
    """Serve's default (ray/serve/autoscaling_policy.py `_core_replica_queue_length_policy`), for contrast."""
    return ctx.total_num_requests / TARGET


def test_a_prefill_bound_load_scales_prefill_and_not_decode() -> None:
    # 8 long prompts in flight: prefill computes 2, 5 wait at decode's handles for a prefill replica;
    # all 8 are requests of decode (7 waiting on prefill, 1 decoding its single token).
    prefill = serve_context(PREFILL, running=2, queued=5)
    decode = serve_context(DECODE, running=8)
    decisions = decide(app_contexts(prefill, decode, serve_context(INGRESS, running=8)))
    assert decisions[PREFILL] == 3.5  # 7 ongoing / target 2: above 1 replica, Serve scales prefill up
    assert decisions[DECODE] == 0.5  # 1 request in decode's own engine: below 1 replica, decode stays
    assert default_policy(decode) == 4.0  # what Serve's default would do: grow decode on prefill's queue


def test_a_prefill_bound_load_that_fills_decodes_slots_still_leaves_decode_alone() -> None:
    # decode's max_ongoing_requests (4) is full of requests waiting on prefill; 4 more wait at the
    # ingress for a decode slot. More decode replicas would only feed prefill's queue.
    prefill = serve_context(PREFILL, running=1, queued=3)
    decode = serve_context(DECODE, running=4, queued=4)
    decisions = decide(app_contexts(prefill, decode))
    assert decisions[DECODE] == 0.0
    assert decisions[PREFILL] == 2.0


def test_a_decode_bound_load_scales_decode_and_not_prefill() -> None:
    # 6 short prompts with long answers: each spends a moment on prefill, then minutes decoding.
    prefill = serve_context(PREFILL, running=0.2)
    decode = serve_context(DECODE, running=6)
    decisions = decide(app_contexts(prefill, decode))
    assert decisions[DECODE] == pytest.approx(2.9)  # (6 - 0.2) / 2
    assert decisions[PREFILL] == pytest.approx(0.1)


def test_a_decode_full_of_its_own_work_scales_even_with_requests_queued_in_front_of_it() -> None:
    # decode's 4 slots all decode; 6 more requests wait at the ingress: decode is the bottleneck.
    decisions = decide(app_contexts(serve_context(PREFILL, running=0), serve_context(DECODE, running=4, queued=6)))
    assert decisions[DECODE] == 2.0
    assert decisions[PREFILL] == 0.0


def test_after_the_load_both_phases_want_fewer_replicas_and_serve_applies_the_delays() -> None:
    """The raw answer drops below the current count at once; `downscale_delay_s` and `min_replicas`
    are Serve's (its wrapper holds a lower decision for the delay, then bounds it by the minimum)."""
    contexts = app_contexts(serve_context(PREFILL, running=0, replicas=2), serve_context(DECODE, running=0, replicas=2))
    decisions = decide(contexts)
    assert decisions == {PREFILL: 0.0, DECODE: 0.0}
    assert all(ctx.policy_state == {} for ctx in contexts.values()), "the policy leaves Serve's state alone"


def test_the_signal_counts_more_replicas_proportionally() -> None:
    # Two decode replicas each running 3 of their own: 6 / 2 = 3 replicas wanted.
    decisions = decide(app_contexts(serve_context(PREFILL, running=1, replicas=2),
                                    serve_context(DECODE, running=7, replicas=2)))
    assert decisions == {PREFILL: 0.5, DECODE: 3.0}


def test_each_phase_divides_by_its_own_target() -> None:
    prefill = serve_context(PREFILL, running=4, config=AutoscalingConfig(target_ongoing_requests=4))
    decode = serve_context(DECODE, running=12, config=AutoscalingConfig(target_ongoing_requests=8))
    assert decide(app_contexts(prefill, decode)) == {PREFILL: 1.0, DECODE: 1.0}


def test_the_ingress_keeps_serves_default_signal() -> None:
    ingress = serve_context(INGRESS, running=3, queued=1)
    decisions = decide(app_contexts(serve_context(PREFILL, running=0), serve_context(DECODE, running=0), ingress))
    assert decisions[INGRESS] == default_policy(ingress) == 2.0


def test_a_decode_without_an_autoscaled_prefill_falls_back_to_serves_default() -> None:
    decode = serve_context(DECODE, running=5, queued=1)
    assert decide(app_contexts(decode)) == {DECODE: default_policy(decode)}


def test_a_deployment_with_no_running_replica_keeps_its_target() -> None:
    ctx = serve_context(DECODE, running=0, replicas=0)
    ctx.target_num_replicas = 1
    assert decide(app_contexts(serve_context(PREFILL, running=3), ctx))[DECODE] == 1.0


def test_an_app_with_no_autoscaling_deployment_gets_no_decision() -> None:
    assert pd_phase_policy({}) == ({}, {})


def test_handles_metrics_that_overshoot_do_not_make_a_signal_negative() -> None:
    # queued and ongoing are aggregated separately (Serve 2.58 does not clamp their difference)
    signals = phase_signals(app_contexts(serve_context(PREFILL, running=3),
                                         serve_context(DECODE, running=-1.0, queued=2.0)))
    assert signals[DeploymentID(DECODE, APP)] == 0.0


@pytest.mark.parametrize(("name", "phase"), [
    ("Prefill:qwen3_5-9b", "prefill"), ("Decode:meta-llama--Llama-3_1-8B", "decode"),
    ("OpenAiIngress", None), ("LLMServer:tiny", None), ("prefill:tiny", None),
])
def test_phases_are_told_by_ray_serve_llms_deployment_names(name: str, phase: Optional[str]) -> None:
    assert phase_of(name) == phase
