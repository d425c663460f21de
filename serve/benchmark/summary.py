"""Numbers from per-request records: pure functions, records in, dict out (Contract 6 summary.json).

Percentiles use linear interpolation between closest ranks (numpy's default "linear" method):
for sorted values v[0..n-1] and q in [0, 100], the rank is h = (n-1)q/100 and the percentile is
v[floor h] + (h - floor h)(v[floor h + 1] - v[floor h]). Latency stats are over completed
requests only; failed requests are counted in requests.failed and in errors by kind, and count as
missing the SLO. TPOT of a request is (e2e - ttft) / (completion_tokens - 1); undefined (left
out) for one-token answers, which then only have to meet the TTFT SLO.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Sequence

from serve.benchmark.schedule import Schedule

PERCENTILES = (50, 90, 95, 99)
GOODPUT_ATTAINMENT = 0.9  # DistServe: the highest rate at which at least 90% of requests meet the SLOs


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """The q-th percentile (0..100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def stats(values: Sequence[float]) -> dict[str, Optional[float]]:
    """mean, p50, p90, p95, p99 (all None when there are no values)."""
    result: dict[str, Optional[float]] = {"mean": sum(values) / len(values) if values else None}
    for q in PERCENTILES:
        result[f"p{q}"] = percentile(values, q)
    return result


def tokens(record: Mapping[str, Any], key: str) -> int:
    """record[key] when it is a token count (a non-negative integer), else 0."""
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def finite_ratio(numerator: float, denominator: Optional[float]) -> Optional[float]:
    """numerator / denominator; None when the denominator is absent or not positive, or the
    quotient is not a finite float."""
    if denominator is None or not denominator > 0:
        return None
    try:
        ratio = numerator / denominator
    except OverflowError:
        return None
    return ratio if math.isfinite(ratio) else None


def tpot_ms(record: Mapping[str, Any]) -> Optional[float]:
    """Time per output token after the first: (e2e - ttft) / (completion_tokens - 1)."""
    count = tokens(record, "completion_tokens")
    if not record.get("ok") or record.get("ttft_ms") is None or count < 2:
        return None
    return (record["e2e_ms"] - record["ttft_ms"]) / (count - 1)


def meets_slo(record: Mapping[str, Any], slo_ttft_ms: float, slo_tpot_ms: float) -> bool:
    if not record.get("ok") or record.get("ttft_ms") is None or record["ttft_ms"] > slo_ttft_ms:
        return False
    tpot = tpot_ms(record)
    return tpot is None or tpot <= slo_tpot_ms


def wall_time_s(records: Iterable[Mapping[str, Any]]) -> float:
    """From the first send to the last end: the span the rates are measured over."""
    sent = [r["sent_s"] for r in records if r.get("sent_s") is not None]
    ends = [r["end_s"] for r in records if r.get("end_s") is not None]
    return max(ends) - min(sent) if sent and ends else 0.0


def summarize(records: Sequence[Mapping[str, Any]], *, slo_ttft_ms: Optional[float] = None,
              slo_tpot_ms: Optional[float] = None, usd_per_hour: Optional[float] = None,
              wall_s: Optional[float] = None) -> dict[str, Any]:
    """The Contract 6 summary of one run (plus `errors` by kind and `wall_s`)."""
    completed = [r for r in records if r.get("ok")]
    wall = wall_time_s(records) if wall_s is None else wall_s

    def per_s(total: int) -> float:  # nothing in no time is a rate of 0 (Contract 6 keeps these numbers)
        return finite_ratio(total, wall) or 0.0

    tpots = [t for t in (tpot_ms(r) for r in completed) if t is not None]
    output_per_s = per_s(sum(tokens(r, "completion_tokens") for r in completed))
    attained: Optional[float] = None
    if slo_ttft_ms is not None and slo_tpot_ms is not None:
        attained = (sum(meets_slo(r, slo_ttft_ms, slo_tpot_ms) for r in records) / len(records)
                    if records else 0.0)
    usd = None if usd_per_hour is None else finite_ratio(usd_per_hour / 3600 * 1_000_000, output_per_s)
    return {
        "requests": {"sent": len(records), "completed": len(completed), "failed": len(records) - len(completed)},
        "ttft_ms": stats([r["ttft_ms"] for r in completed]),
        "itl_ms": stats([gap for r in completed for gap in r.get("itl_ms") or []]),
        "tpot_ms": stats(tpots),
        "e2e_ms": stats([r["e2e_ms"] for r in completed]),
        "request_rate": per_s(len(completed)),
        "input_tokens_per_s": per_s(sum(tokens(r, "prompt_tokens") for r in completed)),
        "output_tokens_per_s": output_per_s,
        "slo": {"ttft_ms": slo_ttft_ms, "tpot_ms": slo_tpot_ms, "attained": attained},
        "usd_per_million_output_tokens": usd,
        "errors": dict(sorted(Counter(r.get("error_kind") or "unknown" for r in records if not r.get("ok")).items())),
        "wall_s": wall,
    }


def goodput(sweep: Sequence[tuple[float, Mapping[str, Any]]],
            threshold: float = GOODPUT_ATTAINMENT) -> dict[str, Any]:
    """DistServe goodput: the highest offered rate whose sub-run met the SLOs for >= threshold of requests.

    `sweep` is (offered rate, summary) pairs. None when no rate qualifies or no SLO was given.
    """
    qualifying = [rate for rate, s in sweep
                  if s["slo"]["attained"] is not None and s["slo"]["attained"] >= threshold]
    return {"rate": max(qualifying) if qualifying else None, "attainment_threshold": threshold,
            "attained_by_rate": {f"{rate:g}": s["slo"]["attained"] for rate, s in sweep}}


class CompareError(ValueError):
    """A run directory that cannot be read: exit 2 in the CLI."""


def step_stats(records: Sequence[Mapping[str, Any]], schedule: Schedule) -> list[dict[str, Any]]:
    """A schedule's steps with what was offered and measured in each (by each request's planned
    send time, `scheduled_s`): summary.json's `schedule.steps`."""
    steps: list[dict[str, Any]] = []
    for index, step in enumerate(schedule.steps):
        start, end = schedule.bounds(index)
        mine = [r for r in records if schedule.step_at(r.get("scheduled_s", -1.0)) == index]
        completed = [r for r in mine if r.get("ok")]
        steps.append({
            "step": index, "at_s": start, "end_s": end, "rate": step.rate, "to": step.to,
            "expected": round(schedule.expected(index), 3),
            "requests": {"sent": len(mine), "completed": len(completed), "failed": len(mine) - len(completed)},
            "offered_rate": finite_ratio(len(mine), end - start),
            "held_by_cap": sum(bool(r.get("held_by_cap")) for r in mine),
            "ttft_ms": {k: v for k, v in stats([r["ttft_ms"] for r in completed]).items() if k in ("p50", "p90")},
            "tpot_ms": {k: v for k, v in stats([t for t in map(tpot_ms, completed) if t is not None]).items()
                        if k in ("p50", "p90")},
        })
    return steps
