"""Reading Prometheus text (an engine's /metrics, Ray's metrics export port) in the real tests.

Parsed with prometheus_client's own text parser; a sample is addressed by its full name as it
appears on the wire (`vllm:nixl_xfer_time_seconds_count`, `ray_vllm_prompt_tokens_by_source_total`)
and a subset of its labels, summed over the rest (engines, replicas).
"""

from __future__ import annotations

from typing import Optional

import requests
from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, timeout_s: float = 60.0) -> str:
    """The metrics page (a busy engine on a loaded 2-core machine can take seconds to answer)."""
    response = requests.get(url, timeout=timeout_s)
    response.raise_for_status()
    return response.text


def sample_total(text: str, name: str, **labels: str) -> Optional[float]:
    """The sum of every sample called `name` whose labels include `labels`; None when there is none."""
    total: Optional[float] = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != name:
                continue
            if all(sample.labels.get(key) == value for key, value in labels.items()):
                total = (total or 0.0) + sample.value
    return total


def value(text: str, name: str, **labels: str) -> float:
    """Like sample_total, but a missing series counts as 0 (a counter that never moved)."""
    return sample_total(text, name, **labels) or 0.0


def names(text: str) -> set[str]:
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
