"""The Status panel's SLO strip and alerts (serve/live_metrics.py) from a real Prometheus.

Prometheus (tests/prometheus_server.py) scrapes the real captured engine pages under the stand-in
stack's Serve deployment names, decode's after a KV load that failed, with raypd's rules for that
stack; the web app's reader asks it through the Kubernetes stand-in's Prometheus Service proxy.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.plan.slo import Slo
from components.render.observability_dashboards import strip_numbers
from serve.kube import client_from_kubeconfig
from serve.live_metrics import dashboard_links, live_metrics, strip_query
from serve.live_status import cluster_status
from serve.prometheus_api import PrometheusApi, PrometheusError
from tests.fakes.kube_api import FakeKubeApi
from tests.prometheus_server import asked_at, need_prometheus, prometheus_with_captures
from tests.prometheus_server import query as prom_query


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_prometheus()
    directory = tmp_path_factory.mktemp("prometheus")
    with FakeKubeApi("healthy") as kube, prometheus_with_captures(kube, directory) as base:
        outputs = kube.outputs()
        yield {"kube": kube, "outputs": outputs, "prometheus": base, "directory": directory,
               "client": client_from_kubeconfig(outputs["kubeconfig"], timeout=10)}


@pytest.mark.slow
def test_the_strip_has_every_number_with_the_values_prometheus_computes(stack: dict[str, Any]) -> None:
    got = live_metrics(stack["client"], stack["outputs"], timeout=10)
    assert got["available"] is True, got
    strip = {n["key"]: n for n in got["strip"]}
    assert list(strip) == [n.key for n in strip_numbers(Slo())]
    # Each value is what its own expression answers alone at the instant the strip was evaluated
    # (the server's query log says when). Asked later instead, a quantile of the captures' few
    # requests moved by a bucket on a busy machine (TTFT p50 0.063 s, then 0.083 s): the rate
    # windows had gained samples in between.
    at = asked_at(stack["directory"], strip_query(strip_numbers(Slo())))
    for number in strip_numbers(Slo()):
        alone = prom_query(stack["prometheus"], number.expr, at=at)["data"]["result"]
        value = float(alone[0]["value"][1]) if alone else math.nan
        shown = strip[number.key]["value"]
        if math.isfinite(value):
            assert shown == pytest.approx(value, rel=0.05), (number.key, shown, value)
        else:
            assert shown is None, (number.key, shown)
    assert strip["ttft_p95"]["value"] is not None and strip["ttft_p95"]["slo"] == Slo().ttft_p95_seconds
    assert strip["ttft_p95"]["breached"] == (strip["ttft_p95"]["value"] > Slo().ttft_p95_seconds)


def test_firing_alerts_are_raypds_with_their_runbook(stack: dict[str, Any]) -> None:
    alerts = live_metrics(stack["client"], stack["outputs"], timeout=10)["alerts"]
    failed = next(a for a in alerts if a["name"] == "RaypdNixlTransferFailed")
    assert failed["state"] == "firing" and failed["severity"] == "critical"
    assert failed["runbook"] == "docs/troubleshooting.md#alert-nixl-transfers-failed"
    assert stack["kube"].deployment_names["decode"] in failed["summary"]
    assert [a["state"] for a in alerts] == sorted((a["state"] for a in alerts), key=lambda s: s != "firing")


def test_the_cluster_status_carries_the_metrics(stack: dict[str, Any]) -> None:
    status = cluster_status(stack["outputs"], timeout=10)
    assert status["metrics"]["available"] is True and status["metrics"]["strip"]


def test_a_bad_expression_is_prometheus_own_error(stack: dict[str, Any]) -> None:
    api = PrometheusApi(stack["client"], timeout=10)
    with pytest.raises(PrometheusError, match=r"refused the query \(HTTP 400, bad_data\)"):
        api.query("sum(")
    assert strip_query(strip_numbers(Slo())).count("label_replace") == len(strip_numbers(Slo()))


def test_without_prometheus_or_without_the_metrics_stack_it_says_why(tmp_path: Path) -> None:
    with FakeKubeApi("healthy") as kube:
        outputs = kube.outputs()
        got = live_metrics(client_from_kubeconfig(outputs["kubeconfig"], timeout=5), outputs, timeout=5)
    assert got == {"available": False, "reason": got["reason"]}
    assert "no endpoints available for service" in got["reason"]
    with FakeKubeApi("healthy", config={"raypd:observability": {"enabled": False}}) as kube:
        outputs = kube.outputs()
        got = live_metrics(client_from_kubeconfig(outputs["kubeconfig"], timeout=5), outputs, timeout=5)
    assert got["available"] is False and "nothing collects metrics" in got["reason"]


def test_the_dashboard_link_is_the_provisioned_dashboards_uid() -> None:
    from components.config.spec import DeploymentSpec
    from components.render.observability_dashboards import dashboards

    (board,) = dashboards(DeploymentSpec.from_config({}, "team-a")).values()
    links = dashboard_links("team-a")
    assert links["links"][0]["url"].startswith(f"http://127.0.0.1:3000/d/{board['uid']}?")
    assert links["portForward"].startswith("kubectl -n monitoring port-forward svc/raypd-grafana 3000:")
