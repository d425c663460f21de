"""Check reports (Contract 5): the one shape preflight and verify answer in.

Other programs and the web app key on the check ids, so they are listed here once, in the order a
report shows them. A report's `ok` is derived (false iff some check failed), never set by hand, and
a check that could not get its evidence is `warn` or `skip`: `Check.passed` is the only way to say
`pass`, and it needs the evidence in its detail. A report whose checks were mostly skipped checked
nothing much: people are shown "not checked" (`Report.verdict`), never "ok", whatever `ok` says.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Iterable, Literal, Mapping, TextIO

from pydantic import BaseModel, ConfigDict, Field, computed_field

PREFLIGHT_IDS: tuple[str, ...] = (
    "aws-credentials", "instance-types", "efa-support", "zone-offering", "eks-zone",
    "vcpu-quota", "gpu-memory-fit", "update-headroom", "model-source", "endpoint-certificate",
)
VERIFY_IDS: tuple[str, ...] = (
    "gpu-nodes", "efa-devices", "one-zone", "rayservice-ready", "serve-app-running",
    "replica-placement", "nixl-backend", "endpoint-models", "endpoint-chat", "kv-transfer",
    "api-parity", "endpoint-external", "endpoint-auth", "dashboard-exposure", "metrics-flowing",
)
KIND_IDS: dict[str, tuple[str, ...]] = {"preflight": PREFLIGHT_IDS, "verify": VERIFY_IDS}
Kind = Literal["preflight", "verify"]
Verdict = Literal["ok", "failed", "not checked"]


class CheckStatus(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


class Check(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=True)

    id: str
    title: str
    status: CheckStatus
    detail: str
    remedy: str = ""

    @classmethod
    def passed(cls, id: str, title: str, evidence: str) -> "Check":
        if not evidence.strip():
            raise ValueError(f"check {id}: a pass needs its evidence in the detail")
        return cls(id=id, title=title, status=CheckStatus.PASS, detail=evidence)

    @classmethod
    def failed(cls, id: str, title: str, detail: str, remedy: str) -> "Check":
        return cls(id=id, title=title, status=CheckStatus.FAIL, detail=detail, remedy=remedy)

    @classmethod
    def warned(cls, id: str, title: str, detail: str, remedy: str = "") -> "Check":
        return cls(id=id, title=title, status=CheckStatus.WARN, detail=detail, remedy=remedy)

    @classmethod
    def skipped(cls, id: str, title: str, why: str, remedy: str = "") -> "Check":
        return cls(id=id, title=title, status=CheckStatus.SKIP, detail=why, remedy=remedy)


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind
    checks: list[Check] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return not any(check.status == CheckStatus.FAIL.value for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.status == CheckStatus.FAIL.value]

    @property
    def skipped(self) -> list[Check]:
        return [check for check in self.checks if check.status == CheckStatus.SKIP.value]

    @property
    def warned(self) -> list[Check]:
        return [check for check in self.checks if check.status == CheckStatus.WARN.value]

    @property
    def verdict(self) -> Verdict:
        """What people are shown (the web app's badge, the CLIs' first line): "failed" when a check
        failed; "not checked" when most checks were skipped (no failure is not a clean bill of
        health when nothing was looked at), also for a report without checks; else "ok"."""
        if not self.ok:
            return "failed"
        if not self.checks or len(self.skipped) * 2 > len(self.checks):
            return "not checked"
        return "ok"

    def as_dict(self) -> dict[str, Any]:
        """The Contract 5 document, keys in the contract's order."""
        return {"kind": self.kind, "ok": self.ok,
                "checks": [check.model_dump(mode="json") for check in self.checks]}

    @classmethod
    def of(cls, kind: Kind, checks: Iterable[Check]) -> "Report":
        """A report in the stable id order; an unknown or repeated id is a bug, not a finding."""
        by_id: dict[str, Check] = {}
        for check in checks:
            if check.id not in KIND_IDS[kind]:
                raise ValueError(f"{check.id} is not a {kind} check id")
            if check.id in by_id:
                raise ValueError(f"{check.id} reported twice")
            by_id[check.id] = check
        return cls(kind=kind, checks=[by_id[i] for i in KIND_IDS[kind] if i in by_id])

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> "Report":
        """Read a stored or received report; `ok` is recomputed, never trusted."""
        body = {key: value for key, value in document.items() if key != "ok"}
        return cls.model_validate(body)


def report_verdict(document: Mapping[str, Any]) -> Verdict:
    """The verdict of a stored or received Contract 5 document (the web app's templates hold dicts,
    with extra keys such as `job` and `at`); a document that is not a report reads "not checked"."""
    try:
        return Report.from_dict({"kind": document.get("kind"), "checks": document.get("checks")}).verdict
    except (ValueError, TypeError):
        return "not checked"


def exit_code(report: Report) -> int:
    """The CLIs' contract: 0 when no check failed, 1 when one did (2 is for invalid input)."""
    return 0 if report.ok else 1


def write_report(report: Report, as_json: bool, out: TextIO) -> int:
    """What both check CLIs end with: the report (`--json`: Contract 5 as JSON; else readable) on
    `out`, and their exit code."""
    out.write((json.dumps(report.as_dict(), indent=2) if as_json else format_report(report)) + "\n")
    return exit_code(report)


STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


def format_report(report: Report) -> str:
    """The readable form the CLIs print without --json: one block per check, remedy under it."""
    verdict = report.verdict
    # A warning is no failure (Contract 5's `ok`) and no skip (the verdict), but it is a check that
    # found no evidence either way: the first line names them, so "ok" never hides them.
    warned = [check.id for check in report.warned]
    head = {"ok": f"ok, {len(warned)} warning(s): {', '.join(warned)}" if warned else "ok", "failed": "FAILED",
            "not checked": f"not checked ({len(report.skipped)} of {len(report.checks)} checks "
                           "skipped)"}[verdict]
    lines = [f"{report.kind}: {head}"]
    for check in report.checks:
        lines.append(f"  [{STATUS_MARK[check.status]}] {check.id}: {check.title}")
        if check.detail:
            lines.append(f"         {check.detail}")
        if check.remedy and check.status != CheckStatus.PASS.value:
            lines.append(f"         fix: {check.remedy}")
    return "\n".join(lines)
