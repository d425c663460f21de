"""Grafana dashboards for the metrics stack: placeholder until h-18b merges."""

from __future__ import annotations

from typing import Any

from components.spec import DeploymentSpec


def dashboards(spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """File name -> Grafana dashboard JSON model: placeholder until h-18b merges."""
    return {"raypd-placeholder.json": {
        "title": f"raypd {spec.service_name} (placeholder)",
        "uid": "raypd-placeholder",
        "schemaVersion": 39,
        "panels": [],
    }}
