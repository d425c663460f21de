"""Replay engine event streams shaped like the Pulumi CLI's own through the translator.

The streams are JSON lines as the CLI writes them with `--event-log` (what the SDK reads with
`EngineEvent.from_json`): a prelude, a pre and an outputs event per step, diagnostics with the CLI's
colour markup, the summary, and the cancelEvent that ends EVERY operation, successful ones too.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

from pulumi.automation import events as ev

from webui.engines.events import EventTranslator, strip_markup

STACK = "urn:pulumi:dev::raypd::pulumi:pulumi:Stack::raypd-dev"
PLAN = [  # (type, logical name, parent component type or None)
    ("raypd:network:Network", "network", None),
    ("aws:ec2/vpc:Vpc", "network-vpc", "raypd:network:Network"),
    ("aws:ec2/natGateway:NatGateway", "network-nat", "raypd:network:Network"),
    ("eks:index:Cluster", "cluster-eks", None),
    ("eks:index:ManagedNodeGroup", "gpu-nodes-group", None),
    ("kubernetes:helm.sh/v3:Release", "addons-kuberay", None),
    ("kubernetes:ray.io/v1:RayService", "pd-service-rayservice", None),
]


def _urn(type_: str, name: str, parent: Optional[str]) -> str:
    chain = f"{parent}${type_}" if parent else type_
    return f"urn:pulumi:dev::raypd::{chain}::{name}"


def _metadata(op: str, type_: str, urn: str) -> dict[str, Any]:
    state = {"type": type_, "urn": urn, "custom": not type_.startswith("raypd:"), "parent": STACK,
             "provider": "", "inputs": {}, "outputs": {}}
    return {"op": op, "urn": urn, "type": type_, "provider": "",
            "old": None if op == "create" else state, "new": None if op == "delete" else state,
            "logical": True}


def cli_stream(op: str, *, diagnostics: Iterable[dict[str, Any]] = (), fail: Optional[str] = None) -> list[str]:
    """The JSON lines of one operation, in the CLI's order and field names."""
    lines: list[dict[str, Any]] = [{"preludeEvent": {"config": {"aws:region": "us-east-2"}}}]
    steps = [(t, n, p) for t, n, p in PLAN]
    if op == "delete":
        steps.reverse()
    for type_, name, parent in steps:
        urn = _urn(type_, name, parent)
        lines.append({"resourcePreEvent": {"metadata": _metadata(op, type_, urn), "planning": False}})
        if fail and name == fail:
            lines.append({"diagnosticEvent": {
                "urn": urn, "prefix": "<{%fg 1%}>error: <{%reset%}>", "color": "raw", "severity": "error",
                "message": "<{%fg 1%}>error: <{%reset%}>creating EKS Cluster (raypd-dev): "
                           "ResourceInUseException: Cluster already exists<{%reset%}>\n",
                "ephemeral": False}})
            lines.append({"resOpFailedEvent": {"metadata": _metadata(op, type_, urn), "status": 1, "steps": 0}})
            break
        lines.append({"resOutputsEvent": {"metadata": _metadata(op, type_, urn), "planning": False}})
    lines.extend({"diagnosticEvent": d} for d in diagnostics)
    changes = {op: len(PLAN)} if not fail else {op: 3}
    lines.append({"summaryEvent": {"maybeCorrupt": False, "durationSeconds": 1412,
                                   "resourceChanges": changes, "PolicyPacks": {}}})
    lines.append({"cancelEvent": {}})  # every stream ends so, success or not
    return [json.dumps({"sequence": seq, "timestamp": 1767000000 + seq, **body})
            for seq, body in enumerate(lines)]


def replay(lines: list[str], cancel_requested: bool = False) -> tuple[EventTranslator, list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    translator = EventTranslator(records.append, expected_total=len(PLAN),
                                 cancel_requested=lambda: cancel_requested)
    for line in lines:
        translator(ev.EngineEvent.from_json(json.loads(line)))
    return translator, records


WARNING = {"color": "raw", "severity": "warning", "ephemeral": False,
           "message": "<{%fg 3%}>warning: <{%reset%}><{%bold%}>eks.Cluster<{%reset%}> is using a "
                      "deprecated default VPC CNI version\n"}


def test_a_successful_up_that_ends_with_the_cancel_event_is_not_a_cancel():
    translator, records = replay(cli_stream("create", diagnostics=[WARNING]))
    messages = " ".join(r.get("message", "") for r in records)
    assert "cancel" not in messages
    assert records[-1]["kind"] == "summary"
    assert records[-1]["done"] == records[-1]["total"] == len(PLAN)
    assert [r["done"] for r in records if r.get("state") == "finished"] == list(range(1, len(PLAN) + 1))
    assert len(translator.resources()) == len(PLAN)


def test_refresh_and_destroy_end_quietly_too():
    for op in ("refresh", "delete"):
        translator, records = replay(cli_stream(op))
        assert not any("cancel" in r.get("message", "") for r in records), op
    assert translator.resources() == []  # a destroy leaves nothing behind


def test_the_cancel_event_is_reported_when_the_user_asked_for_it():
    _, records = replay(cli_stream("create"), cancel_requested=True)
    assert records[-1] == {"kind": "diagnostic", "severity": "warning",
                           "message": "the update stopped on the cancel request"}


def test_colour_markup_never_reaches_people():
    _, records = replay(cli_stream("create", diagnostics=[WARNING], fail="cluster-eks"))
    diagnostics = [r for r in records if r["kind"] == "diagnostic"]
    assert [d["message"] for d in diagnostics] == [
        "error: creating EKS Cluster (raypd-dev): ResourceInUseException: Cluster already exists",
        "warning: eks.Cluster is using a deprecated default VPC CNI version",
    ]
    assert diagnostics[0]["resource"] == "cluster-eks"
    assert not any("<{%" in json.dumps(r) for r in records)
    failed = [r for r in records if r.get("state") == "failed"]
    assert [f["name"] for f in failed] == ["cluster-eks"]


def test_strip_markup_leaves_text_that_only_looks_alike():
    assert strip_markup("<{%fg 1%}>x<{%reset%}> <{not markup}> 5 < 6 %> 4") == "x <{not markup}> 5 < 6 %> 4"
