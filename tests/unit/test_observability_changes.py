"""The change preview for raypd:observability (components.changes.observability): what turning the
metrics stack on or off, resizing it, or the first `up` of a stack deployed before it does."""

from __future__ import annotations

from typing import Any

import pytest

from components.changes.assess import Kind, assess
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.outputs import SYSTEM_ZONE_KEY, render_stack_outputs

OFF = {"raypd:observability": {"enabled": False}}
BEFORE_ISSUE_18 = {"schemaVersion": 1, "imageProvenance": {"reference": "x", "digest": None}}


def effects(before: dict[str, Any], after: dict[str, Any], outputs: dict[str, Any] | None = None):
    result = assess(plan_deployment(DeploymentSpec.from_config(before, "dev")),
                    plan_deployment(DeploymentSpec.from_config(after, "dev")), "us-east-2a", outputs)
    return {effect.subject: effect for effect in result.effects}, result


def test_turning_it_off_rebuilds_the_ray_cluster_and_says_what_is_deleted_and_what_is_kept():
    found, _ = effects({}, OFF)
    assert found["the Ray cluster"].kind == Kind.NEW_RAY_CLUSTER  # the pods lose their metrics ports
    detail = found["raypd:observability.enabled"].detail
    # The namespace goes, and with it both claims: their volumes are deleted, not kept (the old
    # preview said Prometheus's volume stayed; the namespace's deletion takes its claim).
    assert "volume stays" not in detail
    assert "namespace monitoring with Prometheus's and Grafana's volume claims" in detail
    assert "their EBS volumes are deleted" in detail and "metrics history" in detail
    # In the order the program enforces (tests/pulumi/test_observability.py).
    assert detail.index("namespace monitoring") < detail.index("EBS CSI driver")
    assert "every PodMonitor, ServiceMonitor and PrometheusRule in the cluster" in detail
    assert "Kept: nothing of the metrics stack" in detail


def test_a_stack_deployed_before_issue_18_is_told_its_ray_cluster_is_rebuilt_once():
    found, result = effects({}, {}, BEFORE_ISSUE_18)
    assert found["the Ray cluster (observability)"].kind == Kind.NEW_RAY_CLUSTER
    assert result.chosen.downtime_seconds > 0
    found, _ = effects({}, {}, {**BEFORE_ISSUE_18, "observability": {}})
    assert "the Ray cluster (observability)" not in found


def test_a_bigger_volume_does_not_touch_serving_and_says_existing_claims_keep_their_size():
    found, result = effects({}, {"raypd:observability": {"prometheusStorageSize": "100Gi"}})
    assert found["raypd:observability.prometheusStorageSize"].kind == Kind.NO_SERVING_EFFECT
    assert "new volumes only" in found["raypd:observability.prometheusStorageSize"].detail
    assert result.chosen.downtime_seconds == 0


# ---- the system nodes' zone (issue 29): what a roll does to Prometheus and Grafana ----

def current_outputs(**extra: Any) -> dict[str, Any]:
    """Outputs of a stack deployed by this raypd: its system nodes in one zone (systemZone)."""
    return {**render_stack_outputs(DeploymentSpec.from_config({}, "dev"), availability_zone="us-east-2a",
                                   cluster_name="raypd-dev", system_zone="us-east-2a",
                                   image_provenance={"reference": "x", "digest": None}), **extra}


MOVES = "the metrics stack (system nodes)"


@pytest.mark.parametrize(("before", "after", "how"), [
    ({"raypd:kubernetesVersion": "1.34"}, {"raypd:kubernetesVersion": "1.35"}, "roll"),
    ({}, {"raypd:systemNodes": {"instanceType": "m7i.2xlarge"}}, "replaced"),
    ({"raypd:systemNodes": {"count": 2}}, {}, "drains"),
])
def test_a_system_node_roll_says_prometheus_and_grafana_follow_their_volumes_and_go_quiet(before, after, how):
    found, _ = effects(before, after, current_outputs())
    effect = found[MOVES]
    assert effect.kind == Kind.NO_SERVING_EFFECT
    assert how in effect.detail
    # Where they restart, and why they can: the volumes and the nodes share the one zone.
    assert "restart on the system nodes in us-east-2a, where their EBS volumes are" in effect.detail
    assert "no samples are collected and no alert is evaluated" in effect.detail
    assert "history is kept" in effect.detail


def test_no_system_node_roll_no_metrics_effect_and_off_no_metrics_effect():
    found, _ = effects({}, {"raypd:decode": {"replicas": 2}}, current_outputs())
    assert MOVES not in found
    off = {"raypd:observability": {"enabled": False}}
    found, _ = effects({**off, "raypd:kubernetesVersion": "1.34"}, {**off}, current_outputs())
    assert MOVES not in found
    # A refused version step rolls nothing.
    found, result = effects({}, {"raypd:kubernetesVersion": "1.33"}, current_outputs())
    assert result.kind == Kind.REFUSED and MOVES not in found


def test_a_stack_with_system_nodes_in_two_zones_is_told_its_system_group_moves_once():
    """Deployed before issue 29 (no systemZone output): the system node group moves into one zone.
    Its volumes may be in the other zone, which only the cluster knows: say what to check and do."""
    outputs = {k: v for k, v in current_outputs().items() if k != SYSTEM_ZONE_KEY}
    found, result = effects({}, {}, outputs)
    group = found["the system node group (one zone)"]
    assert group.kind == Kind.REPLACE_NODES
    assert "replaced once" in group.detail and "the whole Ray cluster" in group.detail
    assert group.downtime_seconds > 0 and result.chosen.downtime_seconds == group.downtime_seconds
    # The old system node runs until the end of the update: priced like any replaced group.
    assert any("old system node group" in line.why for line in result.chosen.extra_nodes)
    volumes = found[MOVES].detail
    assert "stay Pending" in volumes and "docs/observability.md" in volumes
    assert "delete their claims" in volumes
    # Once deployed by this raypd, nothing more.
    found, result = effects({}, {}, current_outputs())
    assert "the system node group (one zone)" not in found and result.kind == Kind.NO_SERVING_EFFECT
