"""How many engines each phase's Serve deployment runs: its entry in the application's `deployments:`.

A fixed phase gets `{name, num_replicas}`, as it always has. A phase with an `autoscaling` block
(issue 30, components.config.autoscaling_spec) gets `{name, autoscaling_config, max_ongoing_requests}`
instead, and no `num_replicas`: Serve refuses an integer num_replicas beside an autoscaling_config
(Ray 2.58 ray/serve/schema.py `DeploymentSchema.validate_num_replicas_and_autoscaling_config`).

How the override reaches the running deployment (Ray 2.58, read in the wheel's source):
- `ApplicationState.apply_app_config` re-applies the overrides to the deployments it built, without
  building again, while the application's code version is unchanged; `override_deployment_info`
  (ray/serve/_private/application_state.py) `update`s the built deployment's options with the
  override's keys, so the override's `autoscaling_config` replaces the built one whole. The
  LLMConfig keeps `num_replicas` in its own deployment_config (components.render.serve_config), so
  Ray Serve LLM's defaults (`max_ongoing_requests` and `target_ongoing_requests` 1e9,
  ray/llm/_internal/serve/constants.py, merged by core/server/builder.py) never add an autoscaling
  config of their own: Serve's `AutoscalingConfig` defaults (ray/serve/config.py) fill what raypd
  leaves out, and raypd leaves out none of the fields it knows a value for.
- `autoscaling_config` and `max_ongoing_requests` are NeedsActorReconfigure options and
  `num_replicas` is LightWeight (ray/serve/_private/config.py `DeploymentConfig`, update types in
  ray/serve/_private/utils.py `DeploymentOptionUpdateType`): changing them calls the replicas'
  reconfigure and starts or stops replicas; no running engine restarts.
- But the code version (ray/serve/_private/deploy_utils.py `get_app_code_version`) hashes, beside
  import path, runtime_env and args, the `policy` of every override that has an autoscaling_config:
  turning a phase's autoscaling on or off, or changing its policy, is a new code version, which
  rebuilds the application and restarts every engine (components.changes.rayservice says so).
- Serve sets the target count to `initial_replicas` whenever the deployment's config changes
  (ray/serve/_private/autoscaling_state.py `DeploymentAutoscalingState.register`), then the policy
  takes it from there: raypd renders initial_replicas = the phase's `replicas`, its starting count.
"""

from __future__ import annotations

from typing import Any, Optional

from components.config.autoscaling_spec import AutoscalingSpec, engine_max_num_seqs
from components.plan.topology import DeploymentPlan, PhasePlan


def code_version_policies(application: dict[str, Any]) -> list[Any]:
    """The part of a rendered application's Serve code version that comes from autoscaling: the
    `policy` of every `deployments` override with an autoscaling_config (None: Serve's default),
    listed as Ray 2.58's get_app_code_version lists them. Its length says how many phases
    autoscale, so turning one on or off changes it; empty for fixed counts."""
    return [override["autoscaling_config"].get("policy") for override in application.get("deployments") or []
            if isinstance(override.get("autoscaling_config"), dict)]


def autoscaling_policy(plan: DeploymentPlan, phase_name: str) -> Optional[dict[str, Any]]:
    """The Serve autoscaling policy of a phase's deployment, or None for Serve's default.

    Serve's default (`ray.serve.autoscaling_policy:default_autoscaling_policy`) scales on ongoing
    requests per replica. HOOK for the per-phase policy of issue 30 (a decode that scales on its own
    engines' running sequences rather than on requests that include the prefill wait): return
    `{"policy_function": "package.module:function", "policy_kwargs": {...}}` (Ray 2.58
    ray/serve/config.py `AutoscalingPolicy`) for the phases that use it. A policy is part of Serve's
    code version (module docstring): adding, changing or removing one restarts every engine.
    """
    return None


def max_ongoing_requests(phase: PhasePlan) -> int:
    """The most requests Serve sends one replica of an autoscaled phase at once.

    Not Ray Serve LLM's 1e9: with that, every request goes straight to the replicas already
    running and waits in their engines' queues, where a replica Serve adds later can never take it
    over. The engine's own limit instead: vLLM runs at most max_num_seqs sequences at once
    (components.config.autoscaling_spec.engine_max_num_seqs, the default raypd's engines run with),
    so an engine is kept full while the rest of a burst waits in Serve's queue, where the router
    hands it to whichever replica frees up first, the new ones included; and Serve's autoscaler
    still counts those queued requests. The target must stay below it, or Serve never scales
    (override_deployment_info warns "Autoscaling will never happen"): the spec refuses a target
    above it.
    """
    return engine_max_num_seqs(phase.settings.hardware)


def autoscaling_config(plan: DeploymentPlan, phase_name: str) -> dict[str, Any]:
    """Serve's `AutoscalingConfig` of an autoscaled phase (field names: Ray 2.58 ray/serve/config.py)."""
    phase = plan.phases[phase_name]
    scaling = phase.settings.autoscaling
    assert isinstance(scaling, AutoscalingSpec)
    config: dict[str, Any] = {
        "min_replicas": scaling.minimum,
        "max_replicas": scaling.maximum,
        "initial_replicas": phase.replicas,
        # Always explicit: Ray Serve LLM's fallback would be 1e9, Serve's own 2.
        "target_ongoing_requests": scaling.target,
        "upscale_delay_s": scaling.upscale_delay,
        "downscale_delay_s": scaling.downscale_delay,
    }
    policy = autoscaling_policy(plan, phase_name)
    if policy is not None:
        config["policy"] = policy
    return config


def deployment_override(plan: DeploymentPlan, phase_name: str, deployment_name: str) -> dict[str, Any]:
    """One entry of the application's `deployments:` list for a phase's Serve deployment."""
    phase = plan.phases[phase_name]
    if phase.settings.autoscaling is None:
        return {"name": deployment_name, "num_replicas": phase.replicas}
    return {"name": deployment_name, "autoscaling_config": autoscaling_config(plan, phase_name),
            "max_ongoing_requests": max_ongoing_requests(phase)}
