"""What a change does to the RayService, for the change preview (components.changes.assess): its
name, its Ray cluster, its Serve application and the engines' replica counts.

Read with KubeRay's and Ray Serve's rules (components.render.rayservice's docstring): a different
cluster digest means a new Ray cluster; equal digests with different Serve args mean Ray Serve
rebuilds the application, and since the args are each engine's init args it stops every outdated
replica before starting its successor (`DeploymentState._stop_or_update_outdated_version_replicas`):
with no spare GPU each engine is down for a model load; only the per-deployment replica counts
and autoscaling settings change without a restart (components.render.serve_autoscaling cites
Serve's update types), except that Serve counts each deployment's autoscaling policy in the code
version: turning a stack's autoscaling on or off (its first phase on, its last one off) is a new
Ray cluster here anyway (the workers' do-not-evict annotation). One more phase turned on or off
while another autoscales changes neither: a fixed phase of such a disaggregated app is rendered
pinned (components.render.serve_autoscaling.pinned_config), so only its autoscaling_config changes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import yaml

from components.changes.effects import Effect, Kind, minutes
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.topology import DeploymentPlan, PhasePlan, plan_deployment
from components.render.rayservice import RAY_CLUSTER_DIGEST_ANNOTATION, render_rayservice
from components.render.serve_autoscaling import serve_code_version


@dataclass(frozen=True)
class Side:
    """One side of the change as the program would render it, in the GPU zone it runs in."""

    plan: DeploymentPlan
    zone: str


def _rendered(side: Side) -> tuple[dict[str, Any], dict[str, Any]]:
    """(RayService manifest, its one Serve application) as the program would render them, judged
    on the in-place plan: what changes is judged once, the strategy only decides how it is carried
    out (a zero-downtime stack's node set changes with every rebuild by design)."""
    plan = side.plan
    if plan.spec.upgrade_strategy != "inPlace":
        plan = plan_deployment(plan.spec.model_copy(update={"upgrade_strategy": "inPlace"}))
    manifest = render_rayservice(plan, side.zone)
    (app,) = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"]
    return manifest, app


def _serve_code(app: dict[str, Any]) -> str:
    """Ray Serve's code version of a rendered application: a change rebuilds it, restarting every engine."""
    return json.dumps(serve_code_version(app), sort_keys=True)


def rayservice_effects(old: Side, new: Side, on_new_nodes: bool) -> tuple[list[Effect], bool]:
    """(the effects, whether the Ray cluster or the Serve application is rebuilt). `on_new_nodes`:
    GPU or system nodes are replaced, so a new Ray cluster starts on nodes without the image."""
    old_manifest, old_app = _rendered(old)
    new_manifest, new_app = _rendered(new)
    before, after = old.plan.spec, new.plan.spec
    cold_cluster = TYPICAL_SECONDS["kubernetes:ray.io/v1:RayService"]
    effects: list[Effect] = []
    rebuild = False
    if (old_manifest["metadata"]["name"], old_manifest["metadata"]["namespace"]) != (
            new_manifest["metadata"]["name"], new_manifest["metadata"]["namespace"]):
        effects.append(Effect(
            "raypd:namespace / raypd:serviceName", Kind.NEW_ENDPOINT,
            "a new RayService under the new name: the old one (and its endpoint address) is deleted "
            f"first, so clients must move and the endpoint is down for {minutes(cold_cluster)}",
            cold_cluster,
        ))
    elif (old_manifest["metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]
          != new_manifest["metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]):
        rebuild = True
        # New nodes, or a new image, mean an image pull (~500 s) before any engine starts.
        cold = on_new_nodes or before.image_uri != after.image_uri
        warm_cluster = CHANGE_TIMES["ray-cluster-warm-nodes"].seconds
        effects.append(Effect(
            "the Ray cluster", Kind.NEW_RAY_CLUSTER,
            "its pods change (image, Ray version, node selection, sizes"
            + (f"; GCS fault tolerance {before.gcs_store} -> {after.gcs_store}"
               if before.gcs_store != after.gcs_store else "")
            + (f"; {_toggled(old.plan, new.plan)}, so the workers "
               + ("gain" if new.plan.autoscaling else "lose")
               + " the node autoscaler's do-not-evict annotation"
               if old.plan.autoscaling != new.plan.autoscaling else "")
            + "): KubeRay needs a new Ray cluster, started "
            + ("on the new nodes" if cold else "on the nodes already there")
            + f"; every engine loads the model again ({minutes(cold_cluster if cold else warm_cluster)})",
            cold_cluster if cold else warm_cluster,
        ))
    elif _serve_code(old_app) != _serve_code(new_app):
        rebuild = True
        same_engines = all(old_app.get(k) == new_app.get(k) for k in ("import_path", "args"))
        effects.append(_engines_restart(new.plan, _toggled(old.plan, new.plan) if same_engines else None,
                                        changed_engine_settings(old_app, new_app)))
    if not rebuild:
        effects += _replica_effects(old.plan, new.plan)
    return effects, rebuild


def _toggled(old: DeploymentPlan, new: DeploymentPlan) -> str:
    """The phases whose autoscaling is turned on or off (or whose policy changes), in words."""
    turned = [f"{'on' if phase.settings.autoscaling else 'off'} for {name}"
              for name, phase in new.phases.items() if name in old.phases
              and (old.phases[name].settings.autoscaling is None) != (phase.settings.autoscaling is None)]
    return f"autoscaling is turned {' and '.join(turned)}" if turned else "a phase's autoscaling policy changes"


def changed_engine_settings(old_app: dict[str, Any], new_app: dict[str, Any]) -> list[str]:
    """The LLMConfig settings that differ between two Serve applications, as dotted paths of the
    rendered args (`engine_kwargs.kv_transfer_config.kv_load_failure_policy`), over every phase."""
    def flat(value: Any, path: str) -> dict[str, Any]:
        if isinstance(value, dict):
            return {k: v for key, item in value.items() for k, v in flat(item, f"{path}.{key}").items()}
        return {path: value}

    def settings(app: dict[str, Any]) -> dict[str, Any]:
        args = app.get("args") or {}
        configs = args.get("llm_configs") or [args.get("prefill_config"), args.get("decode_config")]
        found: dict[str, Any] = {}
        for index, config in enumerate(configs):
            for path, value in flat(config or {}, "").items():
                found[f"{index}{path}"] = value
        return found

    old, new = settings(old_app), settings(new_app)
    return sorted({path.split(".", 1)[1] for path in old.keys() | new.keys() if old.get(path) != new.get(path)})


def _settings_words(changed: list[str]) -> str:
    """What changed, in words; the KV transfer keys (raypd:kvTransfer.*) are in BOTH phases' args."""
    kv = [path for path in changed if ".kv_transfer_config." in path]
    words = f"the engines' settings change ({', '.join(changed)})" if changed else (
        "the engines' settings change (model, engine arguments, parallelism)")
    if kv:
        words += ("; raypd:kvTransfer's settings are in both phases' kv_transfer_config, so every "
                  "prefill and every decode engine restarts, whichever key changed")
    return words


def _engines_restart(new: DeploymentPlan, autoscaling: Optional[str] = None,
                     changed: Optional[list[str]] = None) -> Effect:
    """`autoscaling`: what changed in the phases' autoscaling when the engines' own settings did not;
    `changed`: the engine settings that changed (changed_engine_settings)."""
    model_load = CHANGE_TIMES["engine-restart"].seconds
    # Serve replaces outdated replicas in batches (rolling_update_percentage): a phase with one
    # engine has none serving meanwhile; with several, some serve while others reload, and old
    # prefill engines may pair with new decode engines until the roll ends.
    single = any(phase.replicas == 1 for phase in new.phases.values())
    why = (_settings_words(changed or []) if autoscaling is None else
           f"{autoscaling}, and Ray Serve counts the deployments' autoscaling policies in the "
           "application's code version (get_app_code_version) as it counts the engines' settings")
    return Effect(
        "the Serve application", Kind.RESTART_ENGINES,
        f"{why}: Ray Serve "
        "redeploys the application and stops each old engine before its successor starts; "
        "with no spare GPU every engine reloads the model "
        + (f"({minutes(model_load)} of downtime: a phase has a single engine)" if single else
           f"({minutes(model_load)} each, in batches: reduced capacity, and old and new "
           "engines serve side by side until the roll ends)"),
        model_load if single else 0.0,
    )


def _replica_effects(old: DeploymentPlan, new: DeploymentPlan) -> list[Effect]:
    """New replica counts, or new autoscaling settings, alone: Serve adds or stops engines in place."""
    fixed = ", ".join(f"{name} {old.phases[name].replicas} -> {phase.replicas}"
                      for name, phase in new.phases.items() if name in old.phases
                      and old.phases[name].settings.autoscaling is None and phase.settings.autoscaling is None
                      and old.phases[name].replicas != phase.replicas)
    effects = [] if not fixed else [Effect(
        "replicas", Kind.IN_PLACE,
        f"{fixed}: in place, no restart of the running engines: Serve adds or stops "
        "engines (a new one serves after its model load), the Ray autoscaler adds or "
        "removes their worker pods",
    )]
    return effects + _autoscaling_effects(old, new)


def _autoscaling_effects(old: DeploymentPlan, new: DeploymentPlan) -> list[Effect]:
    """A phase that autoscales before and after, with other bounds, target, delays or start."""
    effects = []
    for name, phase in new.phases.items():
        before = old.phases[name] if name in old.phases else None
        if before is not None and (before.settings.autoscaling is None) != (phase.settings.autoscaling is None):
            effects.append(_turned_in_place(name, phase))
            continue
        if before is None or before.settings.autoscaling is None or phase.settings.autoscaling is None:
            continue
        was, now = _autoscaling_words(before), _autoscaling_words(phase)
        changed = [f"{key} {was[key]} -> {now[key]}" for key in now if was[key] != now[key]]
        if not changed:
            continue
        effects.append(Effect(
            f"raypd:{name}.autoscaling", Kind.IN_PLACE,
            f"{name}: {', '.join(changed)}: in place, no engine restarts: Serve reconfigures the "
            "deployment's autoscaling (autoscaling_config and max_ongoing_requests are "
            "NeedsActorReconfigure options, ray/serve/_private/config.py); it then sets the count "
            f"back to replicas ({phase.replicas}, its initial_replicas) and scales on from there: "
            "engines above it stop at once and come back after upscaleDelaySeconds if the load "
            "still needs them, so change the block with replicas near the count that runs",
        ))
    return effects


def _turned_in_place(name: str, phase: PhasePlan) -> Effect:
    """A phase's autoscaling turned on or off while another phase of the application autoscales
    (only then is this reached without a rebuild): the Ray cluster keeps its workers' template and
    Serve its code version, since raypd renders a fixed phase of an autoscaled application as an
    autoscaling_config pinned at its count (components.render.serve_autoscaling), so only that
    NeedsActorReconfigure option changes."""
    scaling = phase.settings.autoscaling
    turned = (f"autoscaling turned on ({scaling.minimum}..{scaling.maximum} replicas, target "
              f"{scaling.target:g} ongoing requests each, starting at {phase.replicas})" if scaling is not None
              else f"autoscaling turned off, a fixed count of {phase.replicas}")
    return Effect(
        f"raypd:{name}.autoscaling", Kind.IN_PLACE,
        f"{name}: {turned}: in place, no engine restarts: another phase already autoscales, so "
        "Serve's code version (the application's autoscaling policy) stays and only this "
        "deployment's autoscaling_config changes (a NeedsActorReconfigure option, "
        "ray/serve/_private/config.py)",
    )


def _autoscaling_words(phase: PhasePlan) -> dict[str, str]:
    scaling = phase.settings.autoscaling
    assert scaling is not None
    return {"replicas": str(phase.replicas), "minReplicas": str(scaling.minimum),
            "maxReplicas": str(scaling.maximum), "targetOngoingRequests": f"{scaling.target:g}",
            "upscaleDelaySeconds": f"{scaling.upscale_delay:g}",
            "downscaleDelaySeconds": f"{scaling.downscale_delay:g}"}
