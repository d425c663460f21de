"""Pulumi engine events -> raypd progress records (the Automation API engine's `on_event`).

`on_event` runs on a gRPC worker thread and the SDK swallows exceptions raised there, so a bug in
translation would silently freeze the progress bar: `EventTranslator.__call__` never raises, and
logs what it could not translate instead.

Counting: Pulumi does not announce how many steps an update has. `total` is the number of distinct
resources seen so far, at least the number the last run of this stack touched (`expected_total`),
and becomes exactly `done` when the summary arrives, so a finished job reads 100%.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Callable, Optional

from pulumi.automation import events as pulumi_events

from webui.engines.base import resource_record
from webui.redact import redact
from webui.resource_steps import chain_of

logger = logging.getLogger(__name__)

STACK_TYPE = "pulumi:pulumi:Stack"
# Step ops after which the resource no longer exists (a replacement's "delete-replaced" leaves the
# new resource behind under the same URN, so it is not one of them).
GONE_OPS = ("delete", "discard", "read-discard")
_SEVERITIES = {"info": "info", "info#err": "info", "warning": "warning", "error": "error", "debug": None}
# The CLI's colour markup (`<{%fg 3%}>`, `<{%reset%}>`, `<{%bold%}>`): diagnostics carry it whatever
# `color=` the Automation API asked for; people must see the words only.
_MARKUP = re.compile(r"<\{%.*?%\}>")


def strip_markup(text: str) -> str:
    return _MARKUP.sub("", text)


def urn_name(urn: str) -> str:
    """`urn:pulumi:dev::raypd::aws:ec2/vpc:Vpc::raypd-vpc` -> `raypd-vpc`."""
    return urn.rsplit("::", 1)[-1] if "::" in urn else urn


def _op(metadata: pulumi_events.StepEventMetadata) -> str:
    op = metadata.op
    return op.value if hasattr(op, "value") else str(op)


class EventTranslator:
    """Engine events -> progress records.

    `cancel_requested` says whether the user asked to cancel: the CLI ends EVERY operation's stream
    with a cancelEvent (the SDK's `CancelEvent` docstring: "... or the update successfully
    completes"), so that event alone means nothing; it is a cancel only when one was asked for.
    """

    def __init__(self, emit: Callable[[dict[str, Any]], None], expected_total: int = 0,
                 cancel_requested: Callable[[], bool] = lambda: False):
        self._emit = emit
        self._cancel_requested = cancel_requested
        self.expected_total = expected_total
        self.seen: dict[str, dict[str, Any]] = {}  # urn -> {"type", "name", "state"}
        self.done = 0
        self.changes: dict[str, int] = {}

    @property
    def total(self) -> int:
        return max(self.expected_total, len(self.seen))

    def __call__(self, event: pulumi_events.EngineEvent) -> None:
        try:
            for record in self.translate(event):
                self._emit(record)
        except Exception:  # noqa: BLE001 - must never raise on the gRPC thread (module docstring)
            logger.exception("could not translate a Pulumi engine event")

    def resources(self) -> list[dict[str, Any]]:
        """Resources that finished and still exist, in order (the stack itself left out).

        A step that deleted its resource (a shrunk node group, a removed add-on) finishes too,
        but what it leaves is nothing: it must not be listed among the deployment's resources.
        """
        return [
            {"type": item["type"], "name": item["name"]}
            for item in self.seen.values()
            if item["state"] == "finished" and item["type"] != STACK_TYPE
            and item.get("op") not in GONE_OPS
        ]

    def steps(self) -> list[dict[str, Any]]:
        """What a preview says the update would do, per resource, in the change preview's words
        (a replacement's several Pulumi steps are one "replace"; the stack itself left out), with
        the keys that changed and the resource's place in the tree (its URN's type chain: a
        pulumi-eks component's replaced child is told apart from a system one by it)."""
        words = {"create-replacement": "replace", "delete-replaced": "replace", "replace": "replace",
                 "create": "create", "update": "update", "delete": "delete", "same": "same"}
        return [
            {"type": item["type"], "name": item["name"], "op": words[item["op"]],
             "keys": list(item.get("keys") or []), "chain": chain_of(urn)}
            for urn, item in self.seen.items()
            if item["type"] != STACK_TYPE and item.get("op") in words
        ]

    def translate(self, event: pulumi_events.EngineEvent) -> list[dict[str, Any]]:
        if event.resource_pre_event is not None:
            return self._pre(event.resource_pre_event.metadata)
        if event.res_outputs_event is not None:
            return self._finished(event.res_outputs_event.metadata, "finished")
        if event.res_op_failed_event is not None:
            return self._finished(event.res_op_failed_event.metadata, "failed")
        if event.diagnostic_event is not None:
            return self._diagnostic(event.diagnostic_event)
        if event.summary_event is not None:
            return self._summary(event.summary_event)
        if event.cancel_event is not None and self._cancel_requested():
            return [{"kind": "diagnostic", "severity": "warning",
                     "message": "the update stopped on the cancel request"}]
        return []

    def _pre(self, metadata: pulumi_events.StepEventMetadata) -> list[dict[str, Any]]:
        name = urn_name(metadata.urn)
        op = _op(metadata)
        item = self.seen.setdefault(metadata.urn, {"type": metadata.type, "name": name, "state": "started"})
        if op != "delete-replaced":
            item["op"] = op
        # The changed paths (detailedDiff when the provider gives one, else the changed keys).
        changed = list((metadata.detailed_diff or {}).keys()) or list(metadata.diffs or [])
        if changed:
            item["keys"] = sorted(set(item.get("keys") or []) | set(changed))
        return [resource_record(
            "started", op, metadata.type, name, self.done, self.total, f"{op} {metadata.type} {name}",
        )]

    def _finished(self, metadata: pulumi_events.StepEventMetadata, state: str) -> list[dict[str, Any]]:
        name = urn_name(metadata.urn)
        op = _op(metadata)
        item = self.seen.setdefault(metadata.urn, {"type": metadata.type, "name": name, "state": "started"})
        if item["state"] == "started":
            self.done += 1
        item["state"] = state
        if op != "delete-replaced":
            item["op"] = op
        verb = "failed to" if state == "failed" else "done:"
        return [resource_record(
            state, op, metadata.type, name, self.done, self.total, f"{verb} {op} {metadata.type} {name}",
        )]

    def _diagnostic(self, diagnostic: pulumi_events.DiagnosticEvent) -> list[dict[str, Any]]:
        severity = _SEVERITIES.get(diagnostic.severity, "info")
        message = redact(strip_markup(diagnostic.message or "")).strip()
        if severity is None or diagnostic.ephemeral or not message:
            return []
        record: dict[str, Any] = {"kind": "diagnostic", "severity": severity, "message": message}
        if diagnostic.urn:
            record["resource"] = urn_name(diagnostic.urn)
        return [record]

    def _summary(self, summary: pulumi_events.SummaryEvent) -> list[dict[str, Any]]:
        changes = {str(k): int(v) for k, v in (summary.resource_changes or {}).items()}
        self.changes = changes
        # Everything that will happen has happened: the bar must read done/done.
        for item in self.seen.values():
            if item["state"] == "started":
                item["state"] = "finished"
        self.done = len(self.seen)
        self.expected_total = self.done
        parts = ", ".join(f"{count} {op}" for op, count in sorted(changes.items())) or "no changes"
        message = f"summary: {parts} in {summary.duration_seconds} s"
        if summary.maybe_corrupt:
            message += " (Pulumi reports the state may be inconsistent: run refresh)"
        return [{
            "kind": "summary", "changes": changes, "durationSeconds": summary.duration_seconds,
            "done": self.done, "total": self.done, "message": message,
        }]


def expected_total_from(resources: Optional[list[dict[str, Any]]]) -> int:
    return len(resources or [])
