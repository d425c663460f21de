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
  rebuilds the application and restarts every engine (components.changes.rayservice says so);
  except that a fixed phase of an app under the PD policy is rendered pinned (`pinned_config`), so
  there one more phase turned on or off changes only its override's autoscaling_config.
- Serve sets the target count to `initial_replicas` whenever the deployment's config changes
  (ray/serve/_private/autoscaling_state.py `DeploymentAutoscalingState.register`), then the policy
  takes it from there: raypd renders initial_replicas = the phase's `replicas`, its starting count.
"""

from __future__ import annotations

from typing import Any

from components.config.autoscaling_spec import AutoscalingSpec, engine_max_num_seqs
from components.plan.topology import DeploymentPlan, PhasePlan
from components.render.scaling_policy.rendering import uses_pd_policy


def serve_code_version(application: dict[str, Any]) -> dict[str, Any]:
    """What Ray Serve hashes into a rendered application's code version (Ray 2.58/2.60
    ray/serve/_private/deploy_utils.py `get_app_code_version`): import path, runtime_env, args, the
    application's `autoscaling_policy`, and the `policy` of every `deployments` override with an
    autoscaling_config (None: Serve's default), listed as Serve lists them, so turning a phase's
    autoscaling on or off changes it. raypd renders no request router or deployment actors, the
    other parts. A change here rebuilds the application and restarts every engine."""
    return {
        "import_path": application.get("import_path"),
        "runtime_env": application.get("runtime_env"),
        "args": application.get("args"),
        "autoscaling_policy": application.get("autoscaling_policy"),
        "deployment_autoscaling_policies": [
            override["autoscaling_config"].get("policy") for override in application.get("deployments") or []
            if isinstance(override.get("autoscaling_config"), dict)],
    }


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
    return {
        "min_replicas": scaling.minimum,
        "max_replicas": scaling.maximum,
        "initial_replicas": phase.replicas,
        # Always explicit: Ray Serve LLM's fallback would be 1e9, Serve's own 2.
        "target_ongoing_requests": scaling.target,
        "upscale_delay_s": scaling.upscale_delay,
        "downscale_delay_s": scaling.downscale_delay,
    }


def pinned_config(phase: PhasePlan) -> dict[str, Any]:
    """A fixed phase of an app under the PD policy: autoscaling between `replicas` and `replicas`.

    Serve hands an application-level policy the contexts of its autoscaling deployments only
    (autoscaling_state.py), and decode's signal subtracts prefill's ongoing requests: a fixed
    prefill must still be one of them, or decode would scale on the prefill wait again. Min = max
    keeps the count fixed whatever the policy answers; the target only has to be valid (positive,
    not above max_ongoing_requests), so it is one engine's full load."""
    return {"min_replicas": phase.replicas, "max_replicas": phase.replicas, "initial_replicas": phase.replicas,
            "target_ongoing_requests": max_ongoing_requests(phase)}


def deployment_override(plan: DeploymentPlan, phase_name: str, deployment_name: str) -> dict[str, Any]:
    """One entry of the application's `deployments:` list for a phase's Serve deployment."""
    phase = plan.phases[phase_name]
    if phase.settings.autoscaling is not None:
        config = autoscaling_config(plan, phase_name)
    elif uses_pd_policy(plan):
        config = pinned_config(phase)
    else:
        return {"name": deployment_name, "num_replicas": phase.replicas}
    return {"name": deployment_name, "autoscaling_config": config, "max_ongoing_requests": max_ongoing_requests(phase)}
