"""Verify's `metrics-flowing` against a real Prometheus (Debian's server, tests/prometheus_server.py).

Prometheus scrapes the Kubernetes stand-in's worker pods through its pod proxy (the pages Ray's
metrics agent exports there: vLLM's series tagged ReplicaId once an engine served, Ray Serve's
per-replica counter from the start) and evaluates raypd's rendered rules; verify asks it through
the stand-in's Prometheus Service proxy, as it asks a cluster's. What breaks the phase labels in
a cluster is done here for real: no rules loaded, a replica label the join does not match, a
Prometheus that scrapes nothing, no Prometheus at all.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from components.config.checks import Check
from components.render.observability_rules import prometheus_rule_groups
from serve.evidence import Evidence, VerifyPlan
from serve.verify import run_verify
from serve.verify.metrics_flowing import CHECK_ID, check_metrics_flowing
from tests.fakes.kube_api import FakeKubeApi
from tests.patience import PATIENCE_S
from tests.prometheus_server import (
    Pages,
    need_prometheus,
    page_jobs,
    page_server,
    prometheus_scraping,
    wait_caught_up,
)

FAST = {"kv_wait_seconds": 0, "timeout": 5, "metrics_wait_seconds": PATIENCE_S, "metrics_poll_seconds": 0.5}


def _verify(kube: FakeKubeApi, **options: Any) -> Check:
    report = run_verify(kube.outputs(), **{**FAST, **options})
    return next(c for c in report.checks if c.id == CHECK_ID)


def _verify_after_prometheus_caught_up(kube: FakeKubeApi, base: str) -> Check:
    """The check of a deployment whose metrics are broken, without waiting out its whole wait: a
    first verify chats (its check may fail at once), Prometheus then scrapes every target and
    evaluates every rule after that chat, and only then is the check asked, with no wait. A failure
    now is the setup's, not a Prometheus that had not looked yet."""
    _verify(kube, metrics_wait_seconds=0)
    wait_caught_up(base, time.time())
    return _verify(kube, metrics_wait_seconds=0)


def _direct(kube: FakeKubeApi, wait_seconds: float) -> Check:
    """The check alone, without verify's chat first: no engine has served yet."""
    from serve.kube import client_from_kubeconfig

    outputs = kube.outputs()
    client = client_from_kubeconfig(outputs["kubeconfig"], timeout=5)
    ev = Evidence(client, VerifyPlan.from_outputs(outputs))
    return check_metrics_flowing(ev, outputs, wait_seconds=wait_seconds, poll_seconds=0.5, timeout=5)


@pytest.fixture(autouse=True)
def _prometheus_here() -> None:
    need_prometheus()


@pytest.mark.parametrize("config", [{}, {"raypd:mode": "colocated"},
                                    {"raypd:prefill": {"replicas": 2}, "raypd:decode": {"replicas": 2}}],
                         ids=["pd", "colocated", "two-replicas-each"])
@pytest.mark.slow
def test_every_engine_that_served_reports_under_its_phase(config: dict[str, Any], tmp_path: Path) -> None:
    with FakeKubeApi("healthy", config=config) as kube, prometheus_scraping(kube, tmp_path) as base:
        # Verify passes asked once: a second replica's raw series reach Prometheus a rule evaluation
        # before their phased copy, and the check waits for it (that exact moment, on a scripted
        # Prometheus: tests/unit/test_metrics_flowing_wait.py).
        check = _verify(kube)
        assert check.status == "pass", check.detail
        # Which engines served is the stand-in's truth, and verify's last requests (api-parity's)
        # may come after the last scrape its check saw; once Prometheus caught up with them, the
        # check alone names every engine that served.
        wait_caught_up(base, time.time())
        check = _direct(kube, wait_seconds=0)
    assert check.status == "pass", check.detail
    for phase, replicas in kube.replicas.items():
        assert f"{phase} " in check.detail
        served = [r["replica_id"] for r in replicas if any(kube._engines[r["replica_id"]].values())]
        assert served and all(rid in check.detail for rid in served), (served, check.detail)
    if any(len(r) > 1 for r in kube.replicas.values()):
        assert "have served nothing yet" in check.detail  # prefill's requests all go to its first replica


def test_no_prometheus_behind_the_service_fails_and_says_so() -> None:
    with FakeKubeApi("healthy") as kube:
        check = _verify(kube)
    assert check.status == "fail"
    assert "no endpoints available for service" in check.detail and "kubectl -n monitoring" in check.remedy


@pytest.mark.slow
def test_rules_not_loaded_fail_naming_the_phase_series(tmp_path: Path) -> None:
    with FakeKubeApi("healthy") as kube, prometheus_scraping(kube, tmp_path, rule_groups=[]) as base:
        check = _verify_after_prometheus_caught_up(kube, base)
    assert check.status == "fail"
    assert "replica:raypd_phase:info" in check.detail and "recording rules" in check.detail


@pytest.mark.slow
def test_a_prometheus_that_scrapes_no_worker_pod_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pages = Pages({"/other": [""]})  # some other target, up and empty
    with FakeKubeApi("healthy") as kube, page_server(pages) as target:
        monkeypatch.setattr(kube, "_worker_pods", set())  # scrape_configs: no job
        with prometheus_scraping(kube, tmp_path, extra_jobs=page_jobs(target, pages)) as base:
            monkeypatch.undo()
            check = _verify_after_prometheus_caught_up(kube, base)
    assert check.status == "fail" and "does not scrape their worker pods" in check.detail, check.detail


@pytest.mark.slow
def test_a_replica_label_the_join_does_not_match_leaves_engines_without_a_phase(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray Serve's `replica` label being other than vLLM's ReplicaId (the full replica name, say,
    as some Ray version could write it): the engine series exist, the phased copies do not."""
    original = FakeKubeApi._serve_replica_series

    def full_name(self: FakeKubeApi, pod_ip: str, phase: str, replica: dict[str, Any]) -> str:
        line = original(self, pod_ip, phase, replica)
        rid = replica["replica_id"]
        return line.replace(f'replica="{rid}"', f'replica="SERVE_REPLICA::llm#{rid}"')

    monkeypatch.setattr(FakeKubeApi, "_serve_replica_series", full_name)
    with FakeKubeApi("healthy") as kube, prometheus_scraping(kube, tmp_path) as base:
        check = _verify_after_prometheus_caught_up(kube, base)
    assert check.status == "fail"
    assert "label does not carry the replica id vLLM tags its series with" in check.detail, check.detail
    assert "SERVE_REPLICA::llm#" in check.detail


@pytest.mark.slow
def test_engines_that_never_served_fail_after_the_wait(tmp_path: Path) -> None:
    with FakeKubeApi("healthy") as kube, prometheus_scraping(kube, tmp_path):
        check = _direct(kube, wait_seconds=2)
    assert check.status == "fail"
    assert "engine has series in Prometheus after 2 s" in check.detail and "first request" in check.detail


def test_a_stack_without_the_metrics_stack_is_skipped() -> None:
    with FakeKubeApi("healthy", config={"raypd:observability": {"enabled": False}}) as kube:
        assert "observability" not in kube.outputs()
        check = _verify(kube)
    assert check.status == "skip" and "nothing collects metrics" in check.detail


@pytest.mark.slow
def test_the_rules_rendered_for_another_model_label_no_replica(tmp_path: Path) -> None:
    """A PrometheusRule left from an earlier model: its deployment names match no Serve replica."""
    from components.config.spec import DeploymentSpec

    other = DeploymentSpec.from_config({"raypd:model": {"id": "meta-llama/Llama-3.1-8B-Instruct"}}, "dev")
    with FakeKubeApi("healthy") as kube, \
            prometheus_scraping(kube, tmp_path, rule_groups=prometheus_rule_groups(other)) as base:
        check = _verify_after_prometheus_caught_up(kube, base)
    assert check.status == "fail" and "no replica:raypd_phase:info series" in check.detail, check.detail
