"""raypd's Ray Serve autoscaling policy for a prefill/decode app: each phase scales on its own load.

WHY. Since Ray 2.58 Ray Serve LLM builds the PD graph as ingress -> PDDecodeServer ->
PDPrefillServer (ray/llm/_internal/serve/serving_patterns/prefill_decode/builder.py
`build_pd_openai_app`): decode orchestrates, and `PDOrchestratorMixin._pd_handle_request`
(pd_server.py) awaits the remote prefill inside decode's own request before its engine decodes.
A request therefore counts as ongoing on decode for the whole time it waits or runs on prefill.
Serve's default policy (ray/serve/autoscaling_policy.py `replica_queue_length_autoscaling_policy`:
desired = ongoing requests / target_ongoing_requests) then scales DECODE when PREFILL is the
bottleneck: measured with Ray 2.60 on CPU, a prefill-bound load (long prompts, 1-2 output tokens)
grew prefill and decode to 2 replicas.

THE SIGNALS (each as Serve aggregates it over the deployment's `look_back_period_s`):
- prefill scales on its ongoing requests: running on prefill replicas plus queued at the decode
  replicas' handles for a free prefill replica (the prefill context's `total_num_requests`). Only
  decode calls prefill, so a growing prefill queue is prefill's own load.
- decode scales on the requests in its own engines: the requests running on decode replicas
  (`total_num_requests - total_queued_requests`) minus prefill's ongoing requests, each of which is
  a decode request still waiting for its prefill; never below 0. Requests queued at the ingress for
  a free decode replica are left out: when decode's replicas are full of requests that wait on
  prefill, more decode replicas would only feed the prefill queue. A decode that is itself the
  bottleneck still scales, because its running requests then exceed the target (Serve's advice,
  which raypd follows: `max_ongoing_requests` above `target_ongoing_requests`). Requests decode
  serves without prefill (embeddings, score, tokenize) are decode's own and count.
- any other deployment of the app (the OpenAI ingress) keeps Serve's default signal, its ongoing
  requests.
Each deployment's desired replicas = its signal / its own `target_ongoing_requests`, Serve's formula.

WHAT SERVE STILL DOES. The policy returns raw desired counts. Serve wraps an application-level
policy (`_apply_app_level_autoscaling_config`, ray/serve/autoscaling_policy.py, Ray 2.58 and 2.60)
and applies, per deployment and from that deployment's `autoscaling_config`: upscaling/downscaling
factors, `upscale_delay_s` / `downscale_delay_s` (wall-clock: a decision must hold that long), the
cold start from 0 replicas, and min/max replicas. So scale-down back to `min_replicas` after a load
ends waits `downscale_delay_s`, exactly as with Serve's own policy.

ASSUMPTIONS, stated where they matter: prefill and decode share one look-back window and Serve's
default "mean" aggregation (a difference of means is the mean of the difference; under "max" or
"min" the decode signal is approximate); both phases have an `autoscaling_config` (a fixed phase
as min = max), since Serve gives an application policy contexts only for autoscaling deployments.
If decode has no prefill context, decode falls back to Serve's default signal.

HOW IT RUNS. Named by the Serve config's application-level `autoscaling_policy: {policy_function:
"raypd_pd_autoscaling:pd_phase_policy"}`. Serve's build task (ray/serve/_private/
application_state.py `build_serve_application`) imports it and cloudpickles this module by value;
the controller only unpickles those bytes, each control-loop tick (0.1 s) it calls the policy with
one `AutoscalingContext` per autoscaling deployment (config.py `AutoscalingContext`, built by
autoscaling_state.py `get_autoscaling_context`). Hence this file is self-contained: the standard
library only, nothing of raypd, no Ray import (the contexts arrive as arguments); and quick.
"""

from __future__ import annotations

from typing import Any, Dict, Hashable, Mapping, Optional, Protocol, Tuple, TypeVar

# Ray Serve LLM's deployment names for the phases (builder.py: `name_prefix="Prefill:"` and
# `"Decode:"` before the model id; raypd renders its `deployments` overrides with the same names).
PREFILL_PREFIX = "Prefill:"
DECODE_PREFIX = "Decode:"
PREFILL = "prefill"
DECODE = "decode"
# Serve's own default target (ray/serve/_private/constants.py DEFAULT_TARGET_ONGOING_REQUESTS), for a
# config whose target is unset; raypd always renders an explicit target.
SERVE_DEFAULT_TARGET = 2.0

Key = TypeVar("Key", bound=Hashable)


class ScalingConfig(Protocol):
    """The part of Serve's `AutoscalingConfig` the policy reads."""

    target_ongoing_requests: Optional[float]


class PhaseContext(Protocol):
    """The part of Serve's `AutoscalingContext` the policy reads (same names in Ray 2.58 and 2.60)."""

    deployment_name: str
    current_num_replicas: int
    target_num_replicas: int
    total_num_requests: float
    total_queued_requests: Optional[float]
    config: Any


def phase_of(deployment_name: str) -> Optional[str]:
    """"prefill", "decode", or None for a deployment that is neither (the ingress)."""
    if deployment_name.startswith(PREFILL_PREFIX):
        return PREFILL
    if deployment_name.startswith(DECODE_PREFIX):
        return DECODE
    return None


def running_requests(ctx: PhaseContext) -> float:
    """Requests assigned to the deployment's replicas: ongoing minus those still queued at handles.

    Serve 2.58 leaves the difference unclamped, 2.60 clamps it (`total_running_requests`); the two
    operands are aggregated separately, so it is clamped here for both."""
    queued = ctx.total_queued_requests or 0.0
    return max(0.0, float(ctx.total_num_requests) - float(queued))


def phase_signals(contexts: Mapping[Key, PhaseContext]) -> Dict[Key, float]:
    """The load each deployment scales on (see the module docstring), by the contexts' keys."""
    prefill_ongoing = [float(ctx.total_num_requests) for ctx in contexts.values()
                       if phase_of(ctx.deployment_name) == PREFILL]
    signals: Dict[Key, float] = {}
    for key, ctx in contexts.items():
        phase = phase_of(ctx.deployment_name)
        if phase == DECODE and prefill_ongoing:
            signals[key] = max(0.0, running_requests(ctx) - sum(prefill_ongoing))
        else:  # prefill, the ingress, and a decode whose prefill Serve does not autoscale
            signals[key] = float(ctx.total_num_requests)
    return signals


def target_per_replica(ctx: PhaseContext) -> float:
    """The deployment's `target_ongoing_requests` (Serve validates it as a positive number)."""
    target = getattr(ctx.config, "target_ongoing_requests", None)
    return float(target) if target else SERVE_DEFAULT_TARGET


def desired_replicas(ctx: PhaseContext, signal: float) -> float:
    """Serve's formula on this signal: signal / target. With no running replica there is nothing
    measured yet; keep the current target (as Serve's default policy does)."""
    if ctx.current_num_replicas == 0:
        return float(ctx.target_num_replicas)
    return signal / target_per_replica(ctx)


def pd_phase_policy(contexts: Mapping[Key, PhaseContext]) -> Tuple[Dict[Key, float], Dict[Key, Dict[str, Any]]]:
    """Serve application-level policy: raw desired replicas per deployment, each on its own load.

    `contexts` maps each autoscaling deployment's DeploymentID to its AutoscalingContext; the
    answer uses the same keys. No policy state is kept (Serve keeps its own delay bookkeeping)."""
    signals = phase_signals(contexts)
    return {key: desired_replicas(ctx, signals[key]) for key, ctx in contexts.items()}, {}
