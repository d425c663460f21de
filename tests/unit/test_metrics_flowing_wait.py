"""How long verify's `metrics-flowing` waits, at the exact moments a real Prometheus only sometimes shows.

A scrape stores an engine's raw series; its phased copy comes with the next rule evaluation. With
two replicas per phase the check used to stop once one engine per phase was phased, and judge the
second "without a phase" (CI, against a real Prometheus). Here the Prometheus behind the
Kubernetes stand-in's Prometheus Service answers from a script (tests/fakes/prometheus_script.py),
so each look of the check sees exactly what the test says; the Serve API is the stand-in's.
"""

from __future__ import annotations

import time
from typing import Iterator

import pytest

from components.config.checks import Check
from serve.evidence import Evidence, VerifyPlan
from serve.kube import client_from_kubeconfig
from serve.verify.metrics_flowing import WAIT_SECONDS, check_metrics_flowing
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.prometheus_script import Look, ScriptedPrometheus
from tests.patience import PATIENCE_S

TWO_EACH = {"raypd:prefill": {"replicas": 2}, "raypd:decode": {"replicas": 2}}
POLL_S = 0.05


@pytest.fixture
def two_each() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy", config=TWO_EACH) as kube:
        yield kube


def phases(kube: FakeKubeApi) -> dict[str, str]:
    """ReplicaId -> phase of every replica the stand-in's Serve API lists."""
    return {r["replica_id"]: phase for phase, found in kube.replicas.items() for r in found}


def firsts(kube: FakeKubeApi) -> list[str]:
    return [found[0]["replica_id"] for found in kube.replicas.values()]


def check(kube: FakeKubeApi, script: ScriptedPrometheus, wait_seconds: float) -> Check:
    """The check alone, through the stand-in's API and its Prometheus Service, as verify runs it."""
    kube.prometheus_upstream = script.url
    outputs = kube.outputs()
    ev = Evidence(client_from_kubeconfig(outputs["kubeconfig"], timeout=5), VerifyPlan.from_outputs(outputs))
    return check_metrics_flowing(ev, outputs, wait_seconds=wait_seconds, poll_seconds=POLL_S, timeout=5)


def scripted(*looks: Look) -> ScriptedPrometheus:
    return ScriptedPrometheus(looks)


def test_a_second_replica_phased_one_rule_evaluation_after_its_raw_series_passes(two_each: FakeKubeApi) -> None:
    """Every engine served; at the first look only the first replica of each phase has its phased
    copy (the second's raw series came with a scrape after the last rule evaluation)."""
    info = phases(two_each)
    with scripted(Look.of(info, raw=list(info), phased=firsts(two_each)),
                  Look.of(info, raw=list(info), phased=list(info))) as prometheus:
        result = check(two_each, prometheus, wait_seconds=PATIENCE_S)
    assert result.status == "pass", result.detail
    assert "prefill 2 of 2" in result.detail and "decode 2 of 2" in result.detail
    assert prometheus.readings() == 2  # it looked again at once, and stopped when all were phased


def test_a_listed_replica_never_phased_fails_once_the_wait_is_over(two_each: FakeKubeApi) -> None:
    info = phases(two_each)
    seconds = {rid for rid in info if rid not in firsts(two_each)}
    with scripted(Look.of(info, raw=list(info), phased=firsts(two_each))) as prometheus:
        result = check(two_each, prometheus, wait_seconds=1)
    assert result.status == "fail"
    assert f"engine series without a phase for ReplicaId {', '.join(sorted(seconds))}:" in result.detail
    assert prometheus.readings() > 1  # it waited for the copy before failing


def test_an_engine_the_serve_api_does_not_list_does_not_hold_the_wait() -> None:
    """A replica Serve started after verify read its API (an autoscaled one under load) served
    and exports; its phase is known but its copy never comes within this script. The check looks
    once, passes naming it, and ends long before its wait would."""
    with FakeKubeApi("healthy") as kube:
        info = phases(kube)
        with scripted(Look.of({**info, "late0001": "decode"}, raw=[*info, "late0001"], phased=list(info))) \
                as prometheus:
            started = time.monotonic()
            result = check(kube, prometheus, wait_seconds=2 * PATIENCE_S)
            took = time.monotonic() - started
    assert 2 * PATIENCE_S > WAIT_SECONDS
    assert took < PATIENCE_S, f"the check waited {took:.1f} s for a replica the Serve API does not list"
    assert prometheus.readings() == 1
    assert result.status == "pass", result.detail
    assert "late0001, of replicas the Serve API did not list" in result.detail


def test_an_unlisted_engine_whose_id_no_serve_replica_carries_fails_at_once() -> None:
    """Engine series under a ReplicaId no Serve replica series carries (Ray Serve's `replica`
    label and vLLM's ReplicaId out of step for it): no rule evaluation will ever phase it."""
    with FakeKubeApi("healthy") as kube:
        info = phases(kube)
        stray = "SERVE_REPLICA::llm#x9"
        with scripted(Look.of(info, raw=[*info, stray], phased=list(info))) as prometheus:
            started = time.monotonic()
            result = check(kube, prometheus, wait_seconds=2 * PATIENCE_S)
            took = time.monotonic() - started
    assert took < PATIENCE_S and prometheus.readings() == 1
    assert result.status == "fail"
    assert f"engine series without a phase for ReplicaId {stray}:" in result.detail
