"""What a change of what runs beside serving does, for the change preview (components.changes.assess):
the KubeRay operator and the Hugging Face token's Secret. Both change in place: the operator's
upgrade re-labels the active RayCluster without restarting it, and engines read the token when they
start.
"""

from __future__ import annotations

from components.changes.effects import Effect, Kind
from components.config.spec import DeploymentSpec


def addon_effects(before: DeploymentSpec, after: DeploymentSpec) -> list[Effect]:
    effects: list[Effect] = []
    if before.kuberay_version != after.kuberay_version:
        effects.append(Effect(
            "raypd:kuberayVersion", Kind.IN_PLACE,
            "the KubeRay CRDs and operator are upgraded in place; the Ray pods keep running "
            "(the operator re-labels the active RayCluster, no restart)",
        ))
    if before.hf_token != after.hf_token:
        effects.append(Effect(
            "raypd:hfToken", Kind.NO_SERVING_EFFECT,
            "the token Secret is updated; running engines keep the token they started with and "
            "use the new one at their next start",
        ))
    return effects
