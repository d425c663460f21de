"""What a change does to the RayService, for the change preview (components.changes.assess): its
name, its Ray cluster, its Serve application and the engines' replica counts.

Read with KubeRay's and Ray Serve's rules (components.render.rayservice's docstring): a different
cluster digest means a new Ray cluster; equal digests with different Serve args mean Ray Serve
rebuilds the application, and since the args are each engine's init args it stops every outdated
replica before starting its successor (`DeploymentState._stop_or_update_outdated_version_replicas`):
with no spare GPU each engine is down for a model load; only the per-deployment replica counts
change without a restart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import yaml

from components.changes.effects import Effect, Kind, minutes
from components.plan.durations import CHANGE_TIMES, TYPICAL_SECONDS
from components.plan.topology import DeploymentPlan, plan_deployment
from components.render.rayservice import RAY_CLUSTER_DIGEST_ANNOTATION, render_rayservice


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
    """What Ray Serve hashes into an application's code version (deploy_utils.get_app_code_version):
    a change here rebuilds the application and restarts every engine."""
    return json.dumps({k: app.get(k) for k in ("import_path", "runtime_env", "args")}, sort_keys=True)


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
            "its pods change (image, Ray version, node selection, sizes): KubeRay needs a new Ray "
            "cluster, started "
            + ("on the new nodes" if cold else "on the nodes already there")
            + f"; every engine loads the model again ({minutes(cold_cluster if cold else warm_cluster)})",
            cold_cluster if cold else warm_cluster,
        ))
    elif _serve_code(old_app) != _serve_code(new_app):
        rebuild = True
        effects.append(_engines_restart(new.plan))
    if not rebuild:
        effects += _replica_effects(old.plan, new.plan)
    return effects, rebuild


def _engines_restart(new: DeploymentPlan) -> Effect:
    model_load = CHANGE_TIMES["engine-restart"].seconds
    # Serve replaces outdated replicas in batches (rolling_update_percentage): a phase with one
    # engine has none serving meanwhile; with several, some serve while others reload, and old
    # prefill engines may pair with new decode engines until the roll ends.
    single = any(phase.replicas == 1 for phase in new.phases.values())
    return Effect(
        "the Serve application", Kind.RESTART_ENGINES,
        "the engines' settings change (model, engine arguments, parallelism): Ray Serve "
        "redeploys the application and stops each old engine before its successor starts; "
        "with no spare GPU every engine reloads the model "
        + (f"({minutes(model_load)} of downtime: a phase has a single engine)" if single else
           f"({minutes(model_load)} each, in batches: reduced capacity, and old and new "
           "engines serve side by side until the roll ends)"),
        model_load if single else 0.0,
    )


def _replica_effects(old: DeploymentPlan, new: DeploymentPlan) -> list[Effect]:
    """New replica counts alone: Serve adds or stops engines in place."""
    changes = ", ".join(f"{name} {old.phases[name].replicas} -> {new.phases[name].replicas}"
                        for name in new.phases
                        if name in old.phases and old.phases[name].replicas != new.phases[name].replicas)
    if not changes:
        return []
    return [Effect(
        "replicas", Kind.IN_PLACE,
        f"{changes}: in place, no restart of the running engines: Serve adds or stops "
        "engines (a new one serves after its model load), the Ray autoscaler adds or "
        "removes their worker pods",
    )]
