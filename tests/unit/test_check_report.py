"""The check-report shape (Contract 5): ok derived from the checks, stable ids, no bare pass."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.config.checks import (
    PREFLIGHT_IDS,
    VERIFY_IDS,
    Check,
    Report,
    exit_code,
    format_report,
    report_verdict,
)


def test_ids_are_the_ones_contract_5_lists() -> None:
    assert PREFLIGHT_IDS == ("aws-credentials", "instance-types", "efa-support", "zone-offering",
                             "eks-zone", "vcpu-quota", "gpu-memory-fit", "update-headroom", "model-source",
                             "endpoint-certificate")
    assert VERIFY_IDS == ("gpu-nodes", "efa-devices", "one-zone", "rayservice-ready",
                          "serve-app-running", "replica-placement", "nixl-backend",
                          "endpoint-models", "endpoint-chat", "kv-transfer", "api-parity",
                          "endpoint-external", "endpoint-auth", "dashboard-exposure", "metrics-flowing")


def test_ok_is_false_exactly_when_a_check_failed() -> None:
    calm = Report.of("verify", [
        Check.passed("gpu-nodes", "GPU nodes", "2 of 2 Ready"),
        Check.warned("kv-transfer", "KV transfers", "no metrics found"),
        Check.skipped("efa-devices", "EFA", "backend UCX"),
    ])
    assert calm.ok and calm.as_dict()["ok"] is True and exit_code(calm) == 0
    broken = Report.of("verify", [*calm.checks, Check.failed("one-zone", "One zone", "a, b", "pin")])
    assert not broken.ok and broken.as_dict()["ok"] is False and exit_code(broken) == 1
    assert [c.id for c in broken.failed] == ["one-zone"]


def test_report_lists_checks_in_the_contract_order_whatever_order_they_ran() -> None:
    report = Report.of("preflight", [
        Check.skipped("update-headroom", "h", "new stack"),
        Check.passed("aws-credentials", "c", "account 123"),
    ])
    assert [c["id"] for c in report.as_dict()["checks"]] == ["aws-credentials", "update-headroom"]
    assert set(report.as_dict()["checks"][0]) == {"id", "title", "status", "detail", "remedy"}


def test_unknown_or_repeated_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="not a preflight check id"):
        Report.of("preflight", [Check.passed("gpu-nodes", "t", "e")])
    with pytest.raises(ValueError, match="twice"):
        Report.of("verify", [Check.passed("gpu-nodes", "t", "e"), Check.passed("gpu-nodes", "t", "e")])


def test_a_pass_without_evidence_is_refused() -> None:
    with pytest.raises(ValueError, match="evidence"):
        Check.passed("gpu-nodes", "GPU nodes", "  ")


def test_a_stored_report_cannot_claim_ok_over_a_failed_check() -> None:
    stored = {"kind": "verify", "ok": True, "checks": [
        {"id": "one-zone", "title": "t", "status": "fail", "detail": "d", "remedy": "r"}]}
    assert Report.from_dict(stored).ok is False
    with pytest.raises(ValidationError):
        Report.from_dict({"kind": "verify", "checks": [
            {"id": "one-zone", "title": "t", "status": "fine", "detail": "d"}]})


def test_readable_form_shows_status_detail_and_fix_of_failures_only() -> None:
    text = format_report(Report.of("preflight", [
        Check.passed("aws-credentials", "Credentials", "account 123"),
        Check.failed("vcpu-quota", "vCPU quota", "need 64, have 32", "request 64 vCPUs"),
    ]))
    assert text.splitlines()[0] == "preflight: FAILED"
    assert "[FAIL] vcpu-quota" in text and "fix: request 64 vCPUs" in text
    assert text.count("fix:") == 1


def _verify_report(statuses: list[str]) -> Report:
    makers = {"pass": lambda i: Check.passed(i, "t", "seen"), "warn": lambda i: Check.warned(i, "t", "w"),
              "skip": lambda i: Check.skipped(i, "t", "why"), "fail": lambda i: Check.failed(i, "t", "d", "r")}
    # The first len(statuses) ids: the verdict rules count the checks a report has, whatever ids
    # later issues add to Contract 5.
    assert len(statuses) <= len(VERIFY_IDS)
    return Report.of("verify", [makers[s](i) for s, i in zip(statuses, VERIFY_IDS[:len(statuses)], strict=True)])


def test_mostly_skipped_reads_not_checked_never_ok() -> None:
    assert _verify_report(["skip"] * 10).verdict == "not checked"
    assert _verify_report(["pass"] * 4 + ["skip"] * 6).verdict == "not checked"
    assert _verify_report(["pass"] * 5 + ["skip"] * 5).verdict == "ok"  # half is not most
    assert _verify_report(["pass", "warn"] + ["skip"] * 8).ok is True  # ok stays Contract 5's
    assert _verify_report(["fail"] + ["skip"] * 9).verdict == "failed"
    assert Report.of("verify", []).verdict == "not checked"


def test_the_cli_summary_line_and_a_stored_document_agree_on_the_verdict() -> None:
    report = _verify_report(["pass"] * 3 + ["skip"] * 7)
    assert format_report(report).splitlines()[0] == "verify: not checked (7 of 10 checks skipped)"
    assert format_report(_verify_report(["pass"] * 10)).splitlines()[0] == "verify: ok"
    # warnings are neither failures nor skips: the verdict stays ok, and the first line names them
    warned = _verify_report(["pass"] * 6 + ["warn", "pass", "pass", "warn"])
    assert warned.verdict == "ok" and warned.ok
    assert format_report(warned).splitlines()[0] == "verify: ok, 2 warning(s): nixl-backend, kv-transfer"
    stored = {**report.as_dict(), "job": "j-1", "at": "2026-12-01T12:00:00Z"}  # as the web app keeps it
    assert report_verdict(stored) == "not checked"
    assert report_verdict({"kind": "verify", "checks": "garbage"}) == "not checked"
