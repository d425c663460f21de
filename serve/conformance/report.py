"""The conformance report: one row per feature, the endpoint's verdict and evidence beside the
reference's; as a table for people and as versioned JSON (Contract 7, docs/contracts.md).

A row's `verdict` is the endpoint's. With a reference, `reference` holds the reference's own verdict
for the same requests, and `pdOnly` says the reference passed where the endpoint did not: that
difference is the serving path's (PD), not the model's. Exit code: 1 when any row is `fail` or
`differs` (a broken promise), else 0; `unsupported` is a clean refusal a client can handle.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from serve.conformance.exchange import Exchange
from serve.conformance.features import VERDICTS, Outcome, Verdict

SCHEMA_VERSION = 1
TOOL = "serve.conformance"
BROKEN = (Verdict.FAIL, Verdict.DIFFERS)


@dataclass(frozen=True)
class FeatureResult:
    id: str
    group: str
    title: str
    outcome: Outcome
    reference: Optional[Outcome] = None
    exchanges: tuple[Exchange, ...] = ()
    reference_exchanges: tuple[Exchange, ...] = ()

    @property
    def verdict(self) -> Verdict:
        return self.outcome.verdict

    @property
    def pd_only(self) -> bool:
        """The reference passed the same requests where the endpoint failed, differed or refused (a
        skip is no evidence either way: e.g. the endpoint has no /metrics where the reference has)."""
        return (self.reference is not None and self.reference.verdict == Verdict.PASS
                and self.verdict not in (Verdict.PASS, Verdict.SKIP))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "group": self.group, "title": self.title, **self.outcome.to_json(),
                "reference": self.reference.to_json() if self.reference is not None else None,
                "pdOnly": self.pd_only}


@dataclass(frozen=True)
class Report:
    endpoint: str
    model: str
    results: tuple[FeatureResult, ...]
    reference: Optional[str] = None
    max_model_len: Optional[int] = None
    started: str = ""
    seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        found = Counter(r.verdict.value for r in self.results)
        return {v: found.get(v, 0) for v in VERDICTS}

    @property
    def ok(self) -> bool:
        return not any(r.verdict in BROKEN for r in self.results)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def result(self, feature_id: str) -> FeatureResult:
        return next(r for r in self.results if r.id == feature_id)

    def to_json(self) -> dict[str, Any]:
        return {"schemaVersion": SCHEMA_VERSION, "tool": TOOL, "endpoint": self.endpoint,
                "reference": self.reference, "model": self.model, "maxModelLen": self.max_model_len,
                "startedAt": self.started, "seconds": round(self.seconds, 1), "client": dict(self.versions),
                "ok": self.ok, "counts": self.counts(), "features": [r.to_json() for r in self.results]}

    def table(self) -> str:
        return render_table(self)


def _cell(outcome: Optional[Outcome]) -> str:
    return outcome.verdict.value if outcome is not None else ""


def render_table(report: Report) -> str:
    """A plain-text table: feature, verdict, the reference's verdict when there is one, evidence."""
    with_reference = report.reference is not None
    head = ["feature", "verdict"] + (["reference"] if with_reference else []) + ["evidence"]
    rows = [[r.id, r.verdict.value + (" *" if r.pd_only else "")]
            + ([_cell(r.reference)] if with_reference else []) + [r.outcome.evidence] for r in report.results]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head) - 1)]
    lines = [f"conformance of {report.endpoint} (model {report.model})"
             + (f" against the reference {report.reference}" if with_reference else "")]
    for row in [head, *rows]:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    counts = ", ".join(f"{n} {v}" for v, n in report.counts().items() if n)
    lines.append(f"{len(report.results)} features: {counts}"
                 + ("; * = the reference passed: the difference is the serving path's" if with_reference
                    and any(r.pd_only for r in report.results) else ""))
    return "\n".join(lines) + "\n"


def summary_line(results: Sequence[FeatureResult]) -> str:
    found = Counter(r.verdict.value for r in results)
    return ", ".join(f"{found[v]} {v}" for v in VERDICTS if found.get(v))
