"""Small readers of Kubernetes objects (labels, names, allocatable resources, conditions), the labels
verify and the live status find things by, and the two text helpers their messages share."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from components.config import defaults

ZONE_LABEL = defaults.ZONE_LABEL
INSTANCE_TYPE_LABEL = defaults.INSTANCE_TYPE_LABEL
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_CR_NAME_LABEL = "ray.io/originated-from-cr-name"


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def quantity(value: Any) -> int:
    """Extended resources are plain integers ("1", "32"); anything else counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def allocatable(node: Mapping[str, Any], resource: str) -> int:
    return quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource))


def node_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def condition_of(obj: Mapping[str, Any], kind: str) -> Optional[dict[str, Any]]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return dict(condition)
    return None


def shorten(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_list(items: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
