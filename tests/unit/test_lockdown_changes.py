"""The preview of the first `up` after the lock-down on a stack deployed before it
(components.changes.assess.lockdown_effects): honest about the rolled GPU nodes and the new Ray cluster."""

from __future__ import annotations

from components.changes.assess import Kind, assess
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.outputs import IMAGE_PROVENANCE_KEY, SYSTEM_ZONE_KEY, render_stack_outputs


def plans():
    spec = DeploymentSpec()
    return plan_deployment(spec), plan_deployment(spec)


def old_outputs() -> dict:
    """Outputs of a stack deployed by raypd before issue 17 (no imageProvenance)."""
    return render_stack_outputs(DeploymentSpec(), availability_zone="us-east-2a", cluster_name="raypd-dev")


def test_an_older_stack_is_told_its_gpu_nodes_roll_and_its_ray_cluster_is_rebuilt():
    old, new = plans()
    outputs = old_outputs()
    assert IMAGE_PROVENANCE_KEY not in outputs
    result = assess(old, new, "us-east-2a", deployed_outputs=outputs)
    subjects = {effect.subject: effect for effect in result.effects}
    assert subjects["GPU node groups (lock-down)"].kind == Kind.ROLL_NODES
    assert "hop limit 1" in subjects["GPU node groups (lock-down)"].detail
    assert subjects["the Ray cluster (lock-down)"].kind == Kind.NEW_RAY_CLUSTER
    assert result.chosen.downtime_seconds > 0
    # The roll's surge nodes are counted (quota, cost), and the zero-downtime choice is offered.
    assert result.chosen.extra_nodes
    assert {choice.name for choice in result.choices} == {"inPlace", "newCluster"}


def test_a_lockdown_stack_with_unchanged_settings_has_no_effect():
    old, new = plans()
    # A stack this raypd deployed: also its system zone (issue 29; test_observability_changes.py).
    outputs = {**old_outputs(), IMAGE_PROVENANCE_KEY: {"reference": "x", "digest": None},
               SYSTEM_ZONE_KEY: "us-east-2a"}
    result = assess(old, new, "us-east-2a", deployed_outputs=outputs)
    assert result.kind == Kind.NO_SERVING_EFFECT


def test_without_deployed_outputs_nothing_is_claimed():
    old, new = plans()
    assert assess(old, new, "us-east-2a").kind == Kind.NO_SERVING_EFFECT
    # Outputs that are no raypd outputs document (a partial read) say nothing either.
    partial = {"modelId": "qwen3.5-9b", "region": "us-east-2"}
    assert assess(old, new, "us-east-2a", deployed_outputs=partial).kind == Kind.NO_SERVING_EFFECT
