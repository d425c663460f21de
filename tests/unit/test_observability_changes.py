"""The change preview for raypd:observability (components.changes.observability): what turning the
metrics stack on or off, resizing it, or the first `up` of a stack deployed before it does."""

from __future__ import annotations

from typing import Any

from components.changes.assess import Kind, assess
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment

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
