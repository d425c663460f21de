"""metrics-flowing waits for the join, not only for one engine per phase.

Prometheus sees an engine's raw series a scrape before the rule evaluation that gives them a phase.
With two replicas per phase the check used to stop as soon as one engine per phase was phased and
then judged the other "without a phase" (a CI run against the real Prometheus, two-replicas-each).
Here Prometheus is a script of readings, so the order is exact: the second engine's phased copy
arrives one poll later, and the check must pass.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.render import metric_names as m
from components.render.observability_rules import ENGINE_PRESENCE, PHASE_INFO, phased
from serve.prometheus_api import Sample
from serve.verify import metrics_flowing

REPLICAS = {"prefill": ["p1", "p2"], "decode": ["d1", "d2"]}
PHASE_OF = {rid: phase for phase, ids in REPLICAS.items() for rid in ids}


class ScriptedPrometheus:
    """Answers the check's three queries; the phased engines grow with each reading."""

    def __init__(self, phased_per_reading: list[set[str]]) -> None:
        self.readings = phased_per_reading
        self.reading = -1

    def query(self, expr: str) -> list[Sample]:
        def of(ids: set[str]) -> list[Sample]:
            return [Sample({m.REPLICA_ID_LABEL: rid, m.PHASE_LABEL: PHASE_OF[rid]}, 1.0) for rid in sorted(ids)]

        if PHASE_INFO in expr:  # the first of the three queries of one reading
            self.reading = min(self.reading + 1, len(self.readings) - 1)
            return of(set(PHASE_OF))
        if phased(ENGINE_PRESENCE) in expr:
            return of(self.readings[self.reading])
        assert ENGINE_PRESENCE in expr, expr
        return of(set(PHASE_OF))  # every engine served and exports its raw series


class Evidence:
    def live_client(self) -> None:
        return None

    def engine_replicas(self) -> dict[str, list[dict[str, Any]]]:
        return {phase: [{"replica_id": rid} for rid in ids] for phase, ids in REPLICAS.items()}


def check_with(monkeypatch: pytest.MonkeyPatch, prometheus: ScriptedPrometheus, wait_seconds: float) -> Any:
    monkeypatch.setattr(metrics_flowing, "prometheus_for", lambda *args: prometheus)
    return metrics_flowing.check_metrics_flowing(Evidence(), {"observability": {}}, wait_seconds=wait_seconds,
                                                 poll_seconds=0.0)  # type: ignore[arg-type]


def test_a_second_engine_phased_one_reading_later_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    prometheus = ScriptedPrometheus([{"p1", "d1"}, {"p1", "p2", "d1", "d2"}])
    check = check_with(monkeypatch, prometheus, wait_seconds=60)
    assert check.status == "pass", check.detail
    assert prometheus.reading == 1  # it looked again, and stopped once every engine was phased


def test_an_engine_never_phased_still_fails_once_the_wait_ran_out(monkeypatch: pytest.MonkeyPatch) -> None:
    check = check_with(monkeypatch, ScriptedPrometheus([{"p1", "d1"}]), wait_seconds=0)
    assert check.status == "fail"
    assert "without a phase for ReplicaId d2, p2" in check.detail
