"""Recording rules and alerts for the metrics stack: placeholder until h-18b merges."""

from __future__ import annotations

from typing import Any

from components.spec import DeploymentSpec


def prometheus_rule_groups(spec: DeploymentSpec) -> list[dict[str, Any]]:
    """The `spec.groups` of raypd's PrometheusRule: placeholder until h-18b merges."""
    return [{
        "name": "raypd.placeholder",
        "rules": [{"record": "raypd:ray_pods:up", "expr": f'sum(up{{namespace="{spec.namespace}"}})'}],
    }]
