"""The rules' and dashboards' shape: what Grafana and prometheus-operator need from them and what
a person reading a panel or an alert is told. Their PromQL runs for real in
test_observability_promql.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.config import catalogue
from components.config.spec import DeploymentSpec
from components.render.observability_dashboards import dashboards
from components.render.observability_rules import PHASE_INFO, prometheus_rule_groups

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _rules(spec: DeploymentSpec) -> list[dict[str, Any]]:
    return [rule for group in prometheus_rule_groups(spec) for rule in group["rules"]]


def _dashboard(spec: DeploymentSpec) -> dict[str, Any]:
    (board,) = dashboards(spec).values()
    return board


@pytest.mark.parametrize("autoscaled", [False, True])
def test_the_alerts_each_say_what_it_means_and_link_an_existing_runbook(autoscaled: bool) -> None:
    scaling = {"raypd:decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 2, "targetOngoingRequests": 8}}}
    spec = DeploymentSpec.from_config(scaling if autoscaled else {}, "dev")
    alerts = [rule for rule in _rules(spec) if "alert" in rule]
    # issue 30: RaypdPodsPendingForNodes; RaypdPhaseAtMaxReplicas only where a phase autoscales;
    # issue 31: RaypdReplicaHealthCheckFailed, RaypdHeadRestarted, RaypdSystemNodeNotReady
    assert len(alerts) == (12 if autoscaled else 11)
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', (DOCS / "troubleshooting.md").read_text()))
    for alert in alerts:
        notes = alert["annotations"]
        assert notes["summary"] and len(notes["description"]) > 80, alert["alert"]
        page, anchor = notes["runbook_url"].split("#")
        assert page == "docs/troubleshooting.md" and anchor in anchors, alert["alert"]
        assert alert["labels"]["severity"] in {"warning", "critical"}


def test_the_phase_join_names_the_deployments_serve_runs(reference_spec: DeploymentSpec,
                                                          colocated_spec: DeploymentSpec) -> None:
    (pd,) = [r["expr"] for r in _rules(reference_spec) if r.get("record") == PHASE_INFO]
    assert 'deployment="Prefill:qwen3_5-9b"' in pd and 'deployment="Decode:qwen3_5-9b"' in pd
    assert '"phase", "prefill"' in pd and '"phase", "decode"' in pd
    (colocated,) = [r["expr"] for r in _rules(colocated_spec) if r.get("record") == PHASE_INFO]
    assert 'deployment="LLMServer:qwen3_5-9b"' in colocated and '"phase", "colocated"' in colocated
    assert "Prefill:" not in colocated


def test_dashboard_reads_top_to_bottom_slo_prefill_kv_decode_scaling_capacity(
        reference_spec: DeploymentSpec, colocated_spec: DeploymentSpec) -> None:
    rows = [p["title"] for p in _dashboard(reference_spec)["panels"] if p["type"] == "row"]
    assert rows == ["SLO (ingress)", "Prefill", "KV handoff (NIXL)", "Decode", "Scaling", "Capacity"]
    colocated_rows = [p["title"] for p in _dashboard(colocated_spec)["panels"] if p["type"] == "row"]
    assert not any("KV handoff" in title for title in colocated_rows)


def test_every_panel_has_a_description_a_unit_queries_and_its_own_place(
        reference_spec: DeploymentSpec, heterogeneous_spec: DeploymentSpec) -> None:
    for spec in (reference_spec, heterogeneous_spec):
        board = _dashboard(spec)
        json.dumps(board)  # a JSON model, nothing else
        assert board["schemaVersion"] >= 36
        taken: set[tuple[int, int]] = set()
        for panel in board["panels"]:
            pos = panel["gridPos"]
            assert pos["x"] + pos["w"] <= 24
            cells = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                     for y in range(pos["y"], pos["y"] + pos["h"])}
            assert not cells & taken, panel["title"]
            taken |= cells
            if panel["type"] == "row":
                continue
            assert panel["description"] and panel["fieldConfig"]["defaults"]["unit"]
            assert panel["targets"] and all(t["expr"] for t in panel["targets"])


def test_nixl_throughput_is_labelled_per_rank_against_the_decode_efa_line_rate(
        make_spec: Any) -> None:
    spec = make_spec({"raypd:decode": {"instanceType": "p5.48xlarge"},
                      "raypd:prefill": {"instanceType": "p5.48xlarge"}})
    (panel,) = [p for p in _dashboard(spec)["panels"] if p["title"].startswith("NIXL throughput")]
    assert "per-rank average, not the aggregate" in panel["description"]
    assert "3200 Gbit/s" in panel["description"]
    assert panel["fieldConfig"]["defaults"]["unit"] == "Bps"
    assert any(t["expr"] == "vector(400000000000)" for t in panel["targets"])  # 3200 Gbit/s


def test_every_efa_instance_type_has_a_line_rate_and_no_other_does() -> None:
    for instance in catalogue.CATALOGUE.values():
        rate = catalogue.efa_line_rate_gbps(instance.name)
        assert (rate is not None) == instance.efa_supported, instance.name
