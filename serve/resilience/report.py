"""The resilience report (Contract 8, kind "resilience", schemaVersion 1) and its readable table.

Built by pure functions from what a run measured (`Measured`): the load generator's records, the
fault's time on the run's clock, the readiness samples, and two readings of the decode's KV
counters (serve/kv_evidence.py, read as verify reads them). Its checks use Contract 5's words
(`pass`, `fail`, `skip`) with the evidence in `detail`; their ids are stable (CHECK_IDS).
docs/contracts.md describes every key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from serve.kv_evidence import KvReading, compare_readings
from serve.resilience import judge
from serve.resilience.golden import Golden

KIND = "resilience"
SCHEMA_VERSION = 1
CHECK_IDS = ("recovered", "no-wrong-answers", "no-wedge", "kv-transfer")


@dataclass(frozen=True)
class Settings:
    """How the run was made and judged (all in the report's `load` and `judging` keys)."""

    rate: float
    duration_s: float
    fault_at_s: float
    timeout_s: float
    bucket_s: float = judge.BUCKET_S
    settle_s: float = judge.SETTLE_S
    wedge_s: float = judge.WEDGE_S


@dataclass
class Measured:
    fault: str
    target: str                      # what was hit, in words (pod name, node, process)
    injected: str                    # what the injector did, in words
    fault_s: float                   # on the run's clock
    golden: Golden
    records: list[dict[str, Any]]
    ready: list[tuple[float, Optional[bool]]] = field(default_factory=list)
    kv_before: Optional[KvReading] = None
    kv_after: Optional[KvReading] = None


def _kv(before: Optional[KvReading], after: Optional[KvReading]) -> dict[str, Any]:
    """The decode's counters before and after, and what moved between (only over the pages read
    both times: serve/kv_evidence.py compare_readings)."""
    def totals(reading: Optional[KvReading]) -> Optional[dict[str, Optional[float]]]:
        counters = reading.counters if reading is not None else None
        if counters is None:
            return None
        return {"transfers": counters.transfers, "failedTransfers": counters.failed,
                "expiredLeases": counters.expired, "localComputeTokens": counters.local_tokens,
                "externalTokens": counters.external_tokens}
    if before is None or after is None:
        either = after or before
        return {"read": False, "before": totals(before), "after": totals(after), "change": None,
                "source": either.metrics_source if either is not None else None}
    comparison = compare_readings(before, after)
    change = comparison.change
    return {"read": change is not None, "before": totals(before), "after": totals(after),
            "change": None if change is None else {
                "transfers": change.transfers, "failedTransfers": change.failed,
                "expiredLeases": change.expired, "localComputeTokens": change.local_tokens,
                "externalTokens": change.external_tokens},
            "newLogLines": len(comparison.new_lines), "notCompared": comparison.once,
            "source": after.metrics_source}


def _check(check_id: str, status: str, detail: str) -> dict[str, str]:
    return {"id": check_id, "status": status, "detail": detail}


def _checks(counted: Mapping[str, int], golden: Golden, recovery: judge.Recovery, wedge: judge.Wedge,
            kv: Mapping[str, Any]) -> list[dict[str, str]]:
    checks = [_check("recovered", "pass" if recovery.recovered else "fail", recovery.why)]
    judgeable = len(golden.answers) - len(golden.unstable)
    if judgeable == 0:
        checks.append(_check("no-wrong-answers", "skip", "no prompt had a repeatable golden answer"))
    else:
        status = "pass" if counted["wrong"] == 0 else "fail"
        checks.append(_check("no-wrong-answers", status, f"{counted['wrong']} answer(s) with HTTP 200 differed "
                             f"from the golden answer ({judgeable} of {len(golden.answers)} prompts judged)"))
    checks.append(_check("no-wedge", "skip" if wedge.evidence.startswith("not judged") else
                         "fail" if wedge.detected else "pass", wedge.evidence))
    change = kv.get("change")
    if change is None:
        checks.append(_check("kv-transfer", "skip", "the decode's KV counters were not read both before and after"))
    else:
        bad = change["failedTransfers"] + change["expiredLeases"] + change["localComputeTokens"]
        words = (f"{change['failedTransfers']:g} failed NIXL transfer(s), {change['expiredLeases']:g} expired "
                 f"lease(s), {change['localComputeTokens']:g} prompt token(s) decode computed itself, "
                 f"{change['transfers']:g} transfer(s); source: {kv.get('source')}")
        once = kv.get("notCompared") or []
        if bad <= 0 and once:  # a replaced pod's page is new: what it counted is not known
            checks.append(_check("kv-transfer", "skip", f"{words}; read only once, so not judged: {', '.join(once)}"))
        else:
            checks.append(_check("kv-transfer", "fail" if bad > 0 else "pass", words))
    return checks


def build_report(measured: Measured, settings: Settings) -> dict[str, Any]:
    rows = judge.judged(measured.records, measured.golden.answers)
    counted = judge.counts(rows)
    split = judge.phases(rows, measured.fault_s)
    recovery = judge.recovery(rows, measured.fault_s, settings.settle_s)
    buckets = judge.timeline(rows, settings.bucket_s)
    wedge = judge.wedge(buckets, measured.ready, settings.bucket_s, settings.wedge_s)
    kv = _kv(measured.kv_before, measured.kv_after)
    checks = _checks(counted, measured.golden, recovery, wedge, kv)
    return {
        "kind": KIND, "schemaVersion": SCHEMA_VERSION, "ok": all(c["status"] != "fail" for c in checks),
        "fault": {"name": measured.fault, "target": measured.target, "injected": measured.injected,
                  "atS": round(measured.fault_s, 3)},
        "load": {"rate": settings.rate, "durationS": settings.duration_s, "faultAtS": settings.fault_at_s,
                 "timeoutS": settings.timeout_s,
                 "lastSentS": max((r["sent_s"] for r in rows if r.get("sent_s") is not None), default=None)},
        "judging": {"bucketS": settings.bucket_s, "settleS": settings.settle_s, "wedgeS": settings.wedge_s},
        "golden": measured.golden.as_json(),
        "requests": {**counted,
                     "beforeFault": judge.counts(split.before), "inFlightAtFault": judge.counts(split.in_flight),
                     "afterFault": judge.counts(split.after)},
        "finishReasons": judge.finish_reasons(rows),
        "errors": dict(sorted(_errors(rows).items())),
        "recovery": recovery.as_json(),
        "wedge": wedge.as_json(),
        "kv": kv,
        "timeline": buckets,
        "ready": [{"atS": round(t, 3), "ready": ok} for t, ok in measured.ready],
        "checks": checks,
    }


def _errors(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    tally: dict[str, int] = {}
    for row in rows:
        if not row.get("ok"):
            kind = str(row.get("error_kind") or "unknown")
            status = row.get("status")
            key = f"{kind} {status}" if kind == "http" and status is not None else kind
            tally[key] = tally.get(key, 0) + 1
    return tally


def _number(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.1f}{unit}" if isinstance(value, float) else f"{value}{unit}"


def table(report: Mapping[str, Any]) -> str:
    """The report in words and columns, for a terminal."""
    fault, req, rec = report["fault"], report["requests"], report["recovery"]
    lines = [f"resilience check: fault {fault['name']} on {fault['target']} at {fault['atS']:.1f} s "
             f"({fault['injected']})",
             f"load: {report['load']['rate']:g} req/s for {_number(report['load']['lastSentS'], ' s')} (at most "
             f"{report['load']['durationS']:g} s: it stops once recovered); golden answers for "
             f"{report['golden']['prompts']} prompts ({len(report['golden']['unstable'])} not repeatable)", ""]
    header = f"{'':28}{'sent':>7}{'ok':>7}{'wrong':>7}{'failed<1st':>12}{'failed>1st':>12}"
    lines.append(header)
    for label, key in (("all requests", None), ("ended before the fault", "beforeFault"),
                       ("in flight at the fault", "inFlightAtFault"), ("sent after the fault", "afterFault")):
        part = req if key is None else req[key]
        lines.append(f"{label:28}{part['sent']:>7}{part['ok']:>7}{part['wrong']:>7}"
                     f"{part['failed-before-first-token']:>12}{part['failed-after-first-token']:>12}")
    lines += ["", f"time to recover: {_number(rec['timeToRecoverS'], ' s')} ({rec['why']})",
              f"finish_reason: {', '.join(f'{k} {v}' for k, v in report['finishReasons'].items()) or '-'}",
              f"errors: {', '.join(f'{k} {v}' for k, v in report['errors'].items()) or 'none'}",
              f"wedge: {'YES' if report['wedge']['detected'] else 'no'} ({report['wedge']['evidence']})"]
    change = report["kv"].get("change")
    if change is not None:
        lines.append(f"KV counters: {change['failedTransfers']:g} failed transfers, {change['expiredLeases']:g} "
                     f"expired leases, {change['localComputeTokens']:g} local_compute tokens, "
                     f"{change['transfers']:g} transfers")
    else:
        lines.append("KV counters: not read before and after")
    lines.append("")
    lines += [f"{c['status']:>5}  {c['id']}: {c['detail']}" for c in report["checks"]]
    return "\n".join(lines)
