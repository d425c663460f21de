"""YAML for the Job manifests, without PyYAML in the serving image: only the CLI that prints
them imports this, never the in-cluster `run`."""

from __future__ import annotations

from typing import Any, Sequence

import yaml


def dump_all(documents: Sequence[Any]) -> str:
    return yaml.safe_dump_all(list(documents), sort_keys=False, default_flow_style=False)
